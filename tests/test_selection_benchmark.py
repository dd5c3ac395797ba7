"""The selection benchmark's pure parts (benchmarks/selection_real_suite.py): its edits change
only the function they name (the slowdown keeps its state out of the module's top level), and
what it reads from a gated run's JSON and writes to the page."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import load_module

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "selection_real_suite.py"
bench = load_module("selection_real_suite", SCRIPT)

SOURCE = '''
LIMIT = 3


class Parser:
    def parse(self, n):
        """Sum of squares, recursively."""
        if n == 0:
            return 0
        return n * n + self.parse(n - 1)


def after(x):
    return x + LIMIT
'''


def _suite(tmp_path: Path) -> Any:
    (tmp_path / "pkg.py").write_text(SOURCE)
    target = bench.gates.Target("pkg.py", "Parser.parse", "pkg", "", "")
    return bench.gates.GateSuite(bench.gates.real_suites.Suite("pkg", "1", "test"), target)


def _load(tmp_path: Path, name: str) -> Any:
    return load_module(name, tmp_path / "pkg.py")


@pytest.fixture
def on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """tmp_path importable, as the suite's root is; the helper module forgotten afterwards."""
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop(bench.HELPER, None)


def test_the_slowdown_edits_the_function_only_and_runs(on_path: Path) -> None:
    tmp_path = on_path
    gate = _suite(tmp_path)
    line = bench.inject_slowdown(tmp_path, gate, 5000)
    before, edited = SOURCE.splitlines(), (tmp_path / "pkg.py").read_text().splitlines()
    # Every line outside the function's body is as it was: the module's top level is unchanged,
    # so only the tests that run the function see a change.
    assert edited[:7] == before[:7] and edited[-4:] == before[-4:]
    assert "range(_pss._pss_iterations)" in edited[line - 1]
    module = _load(tmp_path, "pkg_slow")
    assert module.Parser().parse(20) == sum(i * i for i in range(21))
    helper = (tmp_path / f"{bench.HELPER}.py").read_text()
    assert "_pss_iterations = 5000" in helper  # the count, fixed: the same instructions each run


class _Counted:
    """An iteration count that records each loop it starts."""

    def __init__(self) -> None:
        self.loops = 0

    def __index__(self) -> int:
        self.loops += 1
        return 0


def test_the_loop_runs_once_per_outermost_call(on_path: Path) -> None:
    bench.inject_slowdown(on_path, _suite(on_path), 10)
    module = _load(on_path, "pkg_spin")
    helper = importlib.import_module(bench.HELPER)
    helper._pss_iterations = counted = _Counted()
    module.Parser().parse(10)
    assert counted.loops == 1  # the recursion's inner calls loop not
    assert helper._pss_depth == [0]
    module.Parser().parse(3)
    assert counted.loops == 2


def test_the_factor_is_the_odds_ratio_of_the_shares() -> None:
    # Half the test in the function, whose time then grows by 20%: 1.2 / 2.2 of the test.
    assert bench.factor_from_shares(0.5, 1.2 / 2.2) == pytest.approx(1.2)
    assert bench.factor_from_shares(0.25, 0.25) == pytest.approx(1.0)


def test_the_calibration_scales_the_count_to_the_factor() -> None:
    read: list[int] = []

    def measure(iterations: int) -> float:  # the edit costs 3% of the function, each iteration
        read.append(iterations)  # 1e-5 more
        return 1.03 + iterations * 1e-5

    iterations, factor = bench.calibrate(measure, 1.2, start=100)
    assert iterations == 17_000 and factor == pytest.approx(1.2)
    # 100 reads 1.031x: scaled to 645 as if the edit cost nothing (1.036x), then the secant
    # through both readings.
    assert read == [100, 645, 17_000]


def test_the_calibration_grows_a_count_too_small_to_read() -> None:
    read: list[int] = []

    def measure(iterations: int) -> float:
        read.append(iterations)
        return 1 + iterations * 1e-6

    assert bench.calibrate(measure, 1.2, start=100) == (200_000, pytest.approx(1.2))
    assert read[:4] == [100, 1000, 10_000, 100_000]  # under +2% until 100,000
    with pytest.raises(RuntimeError, match="no slowdown"):
        bench.calibrate(lambda n: 1.0, 1.2, tries=2)


def test_the_dead_function_edit_adds_one_statement(tmp_path: Path) -> None:
    (tmp_path / "pkg.py").write_text(SOURCE)
    line = bench._edit_function(tmp_path, "pkg.py", "after", "_pss_unused = None")
    edited = (tmp_path / "pkg.py").read_text().splitlines()
    assert edited[line - 1].strip().startswith("_pss_unused = None")
    assert edited[line - 2].startswith("def after")
    assert len(edited) == len(SOURCE.splitlines()) + 1
    assert _load(tmp_path, "pkg_dead").after(1) == 4


def test_an_unknown_case_or_gate_is_named() -> None:
    with pytest.raises(ValueError, match="unknown case 'slower'"):
        bench.apply_case(Path("."), None, "slower")  # "slower" is not "slow-F"
    with pytest.raises(ValueError, match="'history'"):
        bench.gate_args("history", "abc")


def test_the_selection_is_read_and_its_absence_said() -> None:
    report = {"selection": {"measured": {"t::a": "function changed"}, "unchanged": ["t::b"]}}
    assert bench.selection_of(report) == {
        "measured": {"t::a": "function changed"},
        "unchanged": ["t::b"],
        "note": None,
    }
    assert bench.selection_of({"tests": {}}) is None


def test_caught_and_named_count_only_failing_verdicts() -> None:
    tests = {
        "t::hot_named": {"verdicts": [{"passed": False, "message": "in PrecededBy.parseImpl"}]},
        "t::hot_other": {"verdicts": [{"passed": False, "message": "in Other.parseImpl"}]},
        "t::hot_passed": {"verdicts": [{"passed": True, "message": "PrecededBy.parseImpl"}]},
        "t::cold": {"verdicts": [{"passed": False, "message": None}]},
    }
    hot = {"t::hot_named", "t::hot_other", "t::hot_passed"}
    found = bench.judge(tests, hot, "PrecededBy.parseImpl")
    assert found["failures"] == ["t::cold", "t::hot_named", "t::hot_other"]
    assert found["caught"] == ["t::hot_named", "t::hot_other"]
    assert found["named"] == ["t::hot_named"]
    assert found["messages"]["t::hot_other"] == "in Other.parseImpl"


def test_outcomes_differ_from_plain_only_by_the_verdicts_failures() -> None:
    plain = {"counts": {"passed": 10, "skipped": 2}}
    gated = {"counts": {"passed": 8, "failed": 2, "skipped": 2}, "failures": ["t::a", "t::b"]}
    assert bench.outcomes_as_plain(gated, plain)
    broken = {"counts": {"passed": 8, "failed": 2, "skipped": 2}, "failures": ["t::a"]}
    assert not bench.outcomes_as_plain(broken, plain)  # one test failed by itself


def _row(wall: float, rc: int = 0, measured: int = 0, passed: int = 10) -> dict[str, Any]:
    row: dict[str, Any] = {"wall_s": wall, "cpu_s": wall / 2, "rc": rc, "load_1m": wall**2 / 75}
    row["counts"] = {"passed": passed}
    row["selection"] = {"measured": {f"t::{i}": "x" for i in range(measured)}}
    row["measured_calling"] = [f"t::{i}" for i in range(min(measured, 1))]
    row.update(failures=[], caught=["t::0"] * min(measured, 1), named=[])
    return row


def test_the_table_has_medians_ratios_and_per_run_disagreements() -> None:
    results = {
        "facts": {"hot": ["t::0", "t::1"]},
        "cases": {
            "slow-1.2": {
                "plain": [_row(10.0), _row(12.0), _row(11.0)],
                "ab": [_row(15.0, measured=6), _row(16.5, measured=6), _row(14.0, measured=7)],
                "instructions": [_row(12.0), _row(13.0, rc=7, passed=9), _row(11.0)],
            }
        },
    }
    text = bench.table(results)
    ab = next(r for r in text.splitlines() if r.startswith("| slow-1.2 | ab |"))
    assert "| 15.0 (1.36x) |" in ab  # median 15.0 over plain's median 11.0
    assert "| 6 (1), 6 (1), 7 (1) |" in ab and "| 1 / 0 / 2 |" in ab
    assert ab.endswith("| 3.0 |")  # the median load at the runs' ends (mean: 3.1)
    instructions = next(r for r in text.splitlines() if "| instructions |" in r)
    assert "**no** in 1 run(s)" in instructions and "| 0, 7, 0 |" in instructions


def test_the_page_keeps_its_prose_around_the_results() -> None:
    page = f"# Title\n\nintro\n\n{bench.BEGIN}\nold\n{bench.END}\n\n## Reading\n"
    assert bench.splice(page, "new\n") == (
        f"# Title\n\nintro\n\n{bench.BEGIN}\nnew\n{bench.END}\n\n## Reading\n"
    )
    with pytest.raises(ValueError, match="results"):
        bench.splice("# no markers\n", "new\n")
