"""The JSON profile follows the documented contract (docs/json-schema.md)."""

import json

from pytest_scalene.core.model import LineKey, SessionProfile, TestProfile
from pytest_scalene.reports.json_report import write_json

LINE_KEYS = {"file", "line", "function", "cpu_python_s", "cpu_native_s", "cpu_system_s", "samples"}
TEST_KEYS = {"outcome", "elapsed_s", "cpu_python_s", "cpu_native_s", "cpu_system_s", "lines"}


def test_profile_json_contract(run_profiled):
    source = (
        "def busy():\n    return sum(i * i for i in range(3_000_000))\n\n"
        "def test_a():\n    assert busy()\n\ndef test_b():\n    assert False\n"
    )
    result, profile = run_profiled(source, name="test_contract")
    result.assert_outcomes(passed=1, failed=1)
    assert profile["schema"] == 1
    assert profile["interval_s"] == 0.01 and profile["clock"] == "cpu"
    tests = profile["tests"]
    assert set(tests) == {"test_contract.py::test_a", "test_contract.py::test_b"}
    assert tests["test_contract.py::test_a"]["outcome"] == "passed"
    assert tests["test_contract.py::test_b"]["outcome"] == "failed"
    busy = tests["test_contract.py::test_a"]
    assert busy.keys() >= TEST_KEYS
    assert busy["lines"], "a 0.2 s test must have sampled lines"
    for line in busy["lines"]:
        assert line.keys() >= LINE_KEYS
        assert line["file"] == "test_contract.py"  # relative to the rootdir
    assert any(ln["function"].startswith("busy") and ln["line"] == 2 for ln in busy["lines"])


def test_written_atomically_and_rounded(tmp_path):
    session = SessionProfile(interval_s=0.01, clock="cpu")
    test = session.tests["t"] = TestProfile("t", cpu_python_s=1 / 3)
    test.line(LineKey("a.py", 3, "f"), 1).cpu_native_s = 2 / 3
    out = tmp_path / "deep" / "p.json"
    write_json(session, out)
    data = json.loads(out.read_text())
    assert data["tests"]["t"]["cpu_python_s"] == 0.333333
    assert data["tests"]["t"]["lines"][0]["cpu_native_s"] == 0.666667
    assert [p.name for p in out.parent.iterdir()] == ["p.json"]  # no temp file left behind


def test_written_file_has_the_usual_mode(tmp_path):
    import os

    out = tmp_path / "p.json"
    write_json(SessionProfile(interval_s=0.01, clock="cpu"), out)
    mask = os.umask(0o022)
    os.umask(mask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~mask
