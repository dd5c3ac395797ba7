"""The session summary's ranking of lines: a line's figures add up over the code objects on
it (a comprehension's own, before Python 3.12) and over tests, and "(N tests)" counts tests."""

from __future__ import annotations

from pathlib import Path

from pytest_scalene.core.model import LineKey, LineStats, SessionProfile, TestProfile
from pytest_scalene.reports.terminal_summary import render_summary


def _profile(nodeid: str, *functions: str, alloc_mb: float) -> TestProfile:
    test = TestProfile(nodeid)
    for function in functions:
        stats = LineStats(function_line=1, cpu_python_s=0.1, samples=1)
        stats.extra.update(peak_mb=alloc_mb, alloc_mb=alloc_mb)
        test.lines[LineKey("test_a.py", 2, function)] = stats
    return test


def test_a_line_with_two_code_objects_in_one_test_is_one_test(tmp_path: Path) -> None:
    source = "def test_one():\n    kept = [bytearray(1) for _ in 'ab']\n"
    (tmp_path / "test_a.py").write_text(source)
    one = _profile("test_a.py::test_one", "test_one", "test_one.<locals>.<listcomp>", alloc_mb=5)
    session = SessionProfile(interval_s=0.01, clock="cpu", tests={one.nodeid: one})
    text = render_summary(session, str(tmp_path))
    row = text.split("Top lines by memory")[1].splitlines()[1]
    assert "test_a.py:2  kept" in row, row  # no "(2 tests)": one test ran it
    assert "10.0 MB" in row, row  # both code objects' allocations

    two = _profile("test_a.py::test_two", "test_one", alloc_mb=1)
    session.tests[two.nodeid] = two
    row = render_summary(session, str(tmp_path)).split("Top lines by memory")[1].splitlines()[1]
    assert "test_a.py:2 (2 tests)" in row, row
