"""The terminal report: layout (golden output with fake figures), width, which lines it shows."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from report_samples import sample_session, write_sources

from pytest_scalene.core import model
from pytest_scalene.core.model import LineKey, SessionProfile
from pytest_scalene.core.verdict import Verdict
from pytest_scalene.reports import terminal_report
from pytest_scalene.reports.terminal_report import display_width, render

GOLDEN = Path(__file__).parent / "data" / "terminal_report_golden.txt"


def _rendered(root: Path, **kwargs) -> str:
    write_sources(root)
    return render(sample_session(), str(root), **kwargs)


def test_golden_layout(tmp_path: Path) -> None:
    """Guards the layout. After an intended change: UPDATE_GOLDEN=1 pytest this file, then read
    the diff of the golden file before committing it."""
    text = _rendered(tmp_path) + "\n"
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.write_text(text, encoding="utf-8")
    assert text == GOLDEN.read_text(encoding="utf-8")


def test_every_line_fits_100_columns(tmp_path: Path) -> None:
    session = sample_session()
    # The worst cases for width: a very long test id, a long path, wide (CJK) source text.
    long = model.TestProfile("tests/" + "deeply/nested/" * 8 + "test_x.py::test_" + "y" * 80)
    long.cpu_python_s = 1.0
    (tmp_path / "wide.py").write_text("x = 1\n" + 'label = "東京都の人口と面積と人口密度" * 12\n')
    long.line(LineKey("wide.py", 2, "f")).cpu_python_s = 1.0
    wide_dir = "some/" * 30
    (tmp_path / wide_dir).mkdir(parents=True)
    (tmp_path / wide_dir / "m.py").write_text("y = 2\n")
    long.line(LineKey(wide_dir + "m.py", 1, "g")).cpu_native_s = 1.0
    long.verdicts = [Verdict.from_dict({"passed": False, "message": "a very long message " * 20})]
    session.tests[long.nodeid] = long
    session.notes.append("a long note that must wrap rather than run past the edge " * 4)
    write_sources(tmp_path)
    text = render(session, str(tmp_path))
    widths = [display_width(line) for line in text.splitlines()]
    assert max(widths) <= 100
    assert "東京都" in text  # the wide text was cut to fit, not dropped


def test_display_width_counts_wide_characters() -> None:
    assert display_width("abc") == 3
    assert display_width("東京") == 4
    assert display_width("e\u0301") == 1  # a combining accent takes no column
    assert display_width(terminal_report.fit("東京都の人口", 7)) <= 7


def test_lines_under_one_percent_hidden_unless_neighbours(tmp_path: Path) -> None:
    text = _rendered(tmp_path)
    math = text.split("test_matmul[1500]")[1].split("test_quick")[0]
    # test_math.py line 12 has 0.7% of the test's time and is no neighbour of a shown line.
    assert "a = np.ones((size, size))" not in math
    # Line 13 has no sample at all but is shown as the neighbour of the 90% line 14.
    assert "for _ in range(8):" in math
    assert "a = a @ a / size" in math


def test_header_shows_time_peak_verdicts_leaks_and_sparkline(tmp_path: Path) -> None:
    block = _rendered(tmp_path).split("\n\n")[1]
    lines = block.splitlines()
    assert lines[0] == "tests/test_etl.py::test_load_frame  [failed]"
    assert "time 2.31 s" in lines[1] and "peak 312.4 MB" in lines[1]
    assert lines[2].startswith("  memory ") and "█" in lines[2]
    assert "budget ok   cpu time 2.10 s <= budget 3.00 s" in block
    assert "budget FAIL peak memory 312.4 MB > budget 200 MB" in block
    assert "leak        etl/load.py:11  probability 99%  78.4 MB/s" in block


def test_baseline_verdicts_are_labelled_apart_from_budgets(tmp_path: Path) -> None:
    write_sources(tmp_path)
    session = sample_session()
    etl = session.tests["tests/test_etl.py::test_load_frame"]
    etl.verdicts = [
        *etl.verdicts,
        Verdict.from_dict(
            {
                "kind": "regression",
                "metric": "cpu_s",
                "passed": False,
                "message": "CPU time regressed: 2.10 s vs baseline 1.00 s (+110%, allowed +30%)",
            }
        ),
    ]
    text = render(session, str(tmp_path))
    assert "regressed   CPU time regressed: 2.10 s vs baseline 1.00 s" in text
    assert "budget ok   cpu time 2.10 s" in text
    header = " ".join(text.split("\n\n")[0].split())  # the summary, however it wrapped
    assert "budgets 1 failed of 2 baseline comparisons 1 failed of 1" in header


def _many_lines_session(root: Path, tests: int, lines: int) -> SessionProfile:
    source = "".join(f"v{i} = {i}\n" for i in range(1, lines * 3 + 1))
    (root / "big.py").write_text(source)
    session = SessionProfile(interval_s=0.01, clock="cpu")
    for t in range(tests):
        profile = session.tests.setdefault(
            f"big.py::test_{t}", model.TestProfile(f"big.py::test_{t}")
        )
        for i in range(lines):
            # Lines 3 apart, so that each brings two neighbours of its own; costs all differ.
            stats = profile.line(LineKey("big.py", 3 * i + 2, "f"))
            stats.cpu_python_s = 1.0 + i + t / 10
        profile.cpu_python_s = sum(s.cpu_python_s for s in profile.lines.values())
    return session


def _source_rows(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if re.match(r"  +\d+ ", ln)]


def test_report_shows_at_most_300_source_lines(tmp_path: Path) -> None:
    session = _many_lines_session(tmp_path, tests=5, lines=40)  # 200 lines >= 1%, 600 rows
    text = render(session, str(tmp_path))
    rows = _source_rows(text)
    assert 290 <= len(rows) <= 300
    assert "more line(s) over 1% left out" in text
    # The costliest lines made it: the top line of every test is there.
    for t in range(5):
        block = text.split(f"big.py::test_{t}  ")[1].split("big.py::test_")[0]
        assert " v118 = 118" in block  # line 119 - 1, the neighbour of the costliest line 119


def test_profile_top_keeps_the_n_costliest_lines(tmp_path: Path) -> None:
    session = _many_lines_session(tmp_path, tests=1, lines=10)
    text = render(session, str(tmp_path), top=2)
    shown = {int(row.split()[0]) for row in _source_rows(text)}
    # The two costliest lines (29 and 26) with their neighbours, nothing else.
    assert shown == {25, 26, 27, 28, 29, 30}


def test_no_lines_message(tmp_path: Path) -> None:
    session = SessionProfile(interval_s=0.01, clock="cpu")
    session.tests["t.py::test_fast"] = model.TestProfile("t.py::test_fast", outcome="passed")
    text = render(session, str(tmp_path))
    assert "no sample in profiled code" in text


@pytest.mark.parametrize("width", [100, 80])
def test_narrower_width_is_honoured(tmp_path: Path, width: int) -> None:
    text = _rendered(tmp_path, width=width)
    assert max(display_width(line) for line in text.splitlines()) <= width


def test_a_likely_leak_is_shown_however_small(tmp_path: Path) -> None:
    session = _many_lines_session(tmp_path, tests=1, lines=10)
    profile = session.tests["big.py::test_0"]
    tiny = profile.line(LineKey("big.py", 3, "f"))  # 0.01% of the time, no memory figure
    tiny.cpu_python_s = 0.0001
    profile.extra["leaks"] = [{"file": "big.py", "line": 3, "probability": 0.97, "rate_mb_s": 2.0}]
    text = render(session, str(tmp_path), top=1)
    assert re.search(r"^ +3 .* 97% +v3 = 3$", text, re.MULTILINE)


def test_a_footprint_too_small_to_chart_gets_no_sparkline(tmp_path: Path) -> None:
    session = _many_lines_session(tmp_path, tests=1, lines=2)
    profile = session.tests["big.py::test_0"]
    profile.extra.update(peak_mb=0.02, timeline=[[0.0, 0.0], [0.5, 0.02]])
    text = render(session, str(tmp_path))
    assert "memory " not in text and "█" not in text
