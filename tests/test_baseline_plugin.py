"""Baselines end to end: --profile-save-baseline and --profile-compare in real pytest runs,
edits above a function, bad baseline files, --profile-repeat, xdist, JUnit XML and Markdown."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from shim_support import needs_shim

WORKLOAD = """
import os

SCALE = int(os.environ.get("SCALE", "1"))


def crunch(n):
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def test_crunch():
    assert crunch(SCALE * 400_000) >= 0


def test_small():
    assert sum(range(1000)) > 0
"""


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)


def profile_of(pytester: pytest.Pytester, name: str = "profile.json") -> dict:
    return json.loads((pytester.path / name).read_text())


@pytest.mark.slow
def test_save_writes_one_sorted_file_per_module_with_relative_paths(pytester):
    pytester.makepyfile(test_mod=WORKLOAD)
    result = run(pytester, "--profile-save-baseline", "--profile-memory=no")
    result.assert_outcomes(passed=2)
    path = pytester.path / "baselines" / "test_mod.py.json"
    result.stdout.fnmatch_lines([f"baseline saved: {path} (2 tests)"])
    text = path.read_text()
    data = json.loads(text)
    assert data["module"] == "test_mod.py" and sorted(data["tests"]) == list(data["tests"])
    crunch = data["tests"]["test_mod.py::test_crunch"]
    hot = next(ln for ln in crunch["lines"] if ln["text"] == "total += i * i % 7")
    assert (hot["file"], hot["function"], hot["offset"]) == ("test_mod.py", "crunch", 3)
    assert str(pytester.path) not in text  # paths relative to the rootdir


@pytest.mark.slow
def test_edits_above_and_inside_a_function_still_match_its_lines(pytester, monkeypatch):
    # Enough samples on both sides for the hot line (at 0.05 s it was missed 3 runs in 20).
    monkeypatch.setenv("SCALE", "8")
    pytester.makepyfile(test_mod=WORKLOAD)
    run(pytester, "--profile-save-baseline", "--profile-memory=no").assert_outcomes(passed=2)
    edited = WORKLOAD.replace(
        "def crunch(n):\n    total = 0\n",
        "# a comment\n\n\ndef unrelated():\n    return 1\n\n\n"
        "def crunch(n):\n    # inserted inside the function, above the hot line\n    total = 0\n",
    )
    pytester.makepyfile(test_mod=edited)
    # A wide tolerance: this test is about matching lines, not about CPU noise.
    result = run(
        pytester,
        "--profile-compare",
        "--profile-memory=no",
        "--profile-budget=regression=20",
        "--profile-json=profile.json",
    )
    result.assert_outcomes(passed=2)
    baseline = profile_of(pytester)["tests"]["test_mod.py::test_crunch"]["baseline"]
    assert baseline["matched_by_text"] >= 1 and baseline["matched_by_offset"] == 0
    assert baseline["file"] == "baselines/test_mod.py.json"  # rootdir-relative, like every path
    assert not [n for n in baseline["notes"] if "new line" in n or "vanished line" in n]


@pytest.mark.slow
def test_a_regression_fails_naming_the_line(pytester, monkeypatch):
    pytester.makepyfile(test_mod=WORKLOAD)
    run(pytester, "--profile-save-baseline", "--profile-memory=no").assert_outcomes(passed=2)
    # 30x the work: beyond any noise. 8x failed in a fast phase of the machine: 0.03 s -> 0.15 s
    # grew by less than the 0.13 s that 3 standard errors of 10 ms samples ask of it.
    monkeypatch.setenv("SCALE", "30")
    result = run(pytester, "--profile-compare", "--profile-memory=no")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.re_match_lines(
        [
            r"CPU time regressed at test_mod.py:9 crunch `total \+= i \* i % 7`: "
            r"\d+\.\d\d s vs baseline \d+\.\d\d s \(\+\d+%, allowed \+75%\)"
        ]
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("{", "not valid JSON (truncated or corrupt?)"),
        ('{"schema": 7}', "written by a newer pytest-scalene (baseline schema 7"),
        (None, 'expected a finite non-negative number, got "fast"'),
    ],
)
def test_a_bad_baseline_file_is_a_usage_error_naming_it(pytester, content, reason):
    pytester.makepyfile(test_mod=WORKLOAD)
    run(pytester, "--profile-save-baseline", "--profile-memory=no").assert_outcomes(passed=2)
    path = pytester.path / "baselines" / "test_mod.py.json"
    if content is None:  # edited by hand
        data = json.loads(path.read_text())
        data["tests"]["test_mod.py::test_small"]["metrics"]["cpu_s"] = "fast"
        content = json.dumps(data)
    path.write_text(content)
    result = run(pytester, "--profile-compare", "--profile-memory=no")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --profile-compare cannot use the baselines:", f"*baseline file {path}: *{reason}*"]
    )
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_compare_without_baselines_is_a_usage_error(pytester):
    pytester.makepyfile(test_mod=WORKLOAD)
    result = run(pytester, "--profile-compare", "--profile-memory=no")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --profile-compare: no baseline directory at *baselines*"])


def test_memory_gates_without_memory_profiling_are_a_usage_error(pytester):
    pytester.makepyfile(test_mod=WORKLOAD)
    result = run(pytester, "--profile", "--profile-memory=no", "--profile-budget=leaks=false")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --profile-budget leaks=... needs memory profiling, which is off in this run "
            "(--profile-memory=no)*"
        ]
    )


@pytest.mark.slow
def test_repeat_runs_the_call_phase_n_times(pytester):
    pytester.makepyfile(
        test_rep="""
        import pytest

        CALLS = []

        @pytest.fixture
        def setups():
            CALLS.append("setup")
            return CALLS

        @pytest.mark.perf_budget(cpu_s=10)
        def test_counted(setups):
            setups.append("call")

        def test_not_profiled():
            CALLS.append("plain")

        def test_zz_check():
            assert CALLS.count("setup") == 1 and CALLS.count("call") == 3
            assert CALLS.count("plain") == 1
        """
    )
    result = run(pytester, "--profile-repeat=3", "--profile-memory=no", "--profile-json=p.json")
    result.assert_outcomes(passed=3)
    assert profile_of(pytester, "p.json")["tests"]["test_rep.py::test_counted"]["repeat"] == 3


@pytest.mark.slow
def test_repeat_for_a_duration_runs_until_the_runs_have_lasted_that_long(pytester):
    pytester.makepyfile(
        test_dur="""
        import time
        from pathlib import Path

        def test_timed():
            with Path("calls.txt").open("a") as calls:
                calls.write("call\\n")
            time.sleep(0.1)
        """
    )
    result = run(
        pytester,
        "--profile-repeat=0.5s",
        "--profile-memory=no",
        "--profile-save-baseline",
        "--profile-json=p.json",
    )
    result.assert_outcomes(passed=1)
    runs = profile_of(pytester, "p.json")["tests"]["test_dur.py::test_timed"]["repeat"]
    # Each run sleeps >= 0.1 s: five reach 0.5 s; a slow machine may need fewer, never more.
    assert 2 <= runs <= 5
    assert (pytester.path / "calls.txt").read_text().splitlines() == ["call"] * runs
    baseline = json.loads((pytester.path / "baselines" / "test_dur.py.json").read_text())
    assert baseline["repeat"] == runs


XDIST_SUITE = """
import os
import pytest

SCALE = int(os.environ.get("SCALE", "1"))


def crunch(n):
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


@pytest.mark.parametrize("k", range(4))
def test_steady(k):
    assert crunch(200_000) >= 0


def test_slowed():
    assert crunch(SCALE * 300_000) >= 0


@pytest.mark.perf_budget(cpu_s=0.001)
def test_over_budget():
    assert crunch(200_000) >= 0
"""


def _verdicts(profile: dict) -> set[tuple]:
    return {
        (nodeid, v["kind"], v["metric"], v["line"], v["passed"])
        for nodeid, test in profile["tests"].items()
        for v in test.get("verdicts", [])
    }


def _outcomes(verdicts: set[tuple]) -> set[tuple]:
    """Failed verdicts and test-level passes, without the line they name."""
    return {(n, kind, metric, ok) for n, kind, metric, line, ok in verdicts if not ok or not line}


@pytest.mark.slow
def test_xdist_controller_merges_and_verdicts_match_a_plain_run(pytester, monkeypatch):
    pytester.makepyfile(test_x=XDIST_SUITE)
    saved = run(
        pytester,
        "-n",
        "2",
        "--profile-save-baseline",
        "--profile-memory=no",
        "--profile-json=saved.json",
        "--profile-repeat=2",  # warm runs: which test is a worker's first (warm-up) varies
    )
    saved.assert_outcomes(passed=5, failed=1)
    assert saved.stdout.str().count("baseline saved:") == 1
    assert sorted((pytester.path / "baselines").rglob("*.json")) == [
        pytester.path / "baselines" / "code-map.json",  # which code each test ran
        pytester.path / "baselines" / "test_x.py.json",
    ]
    stored = json.loads((pytester.path / "baselines" / "test_x.py.json").read_text())
    assert len(stored["tests"]) == 5  # the test over budget did not pass: not saved
    assert len(profile_of(pytester, "saved.json")["tests"]) == 6  # the controller's JSON

    # 20x the work against +500% allowed: the verdicts are about merging, not about noise.
    monkeypatch.setenv("SCALE", "20")
    compare = (
        "--profile-compare",
        "--profile-memory=no",
        "--profile-budget=regression=5",
        "--profile-repeat=2",
    )
    plain = run(pytester, *compare, "--profile-json=plain.json")
    spread = run(pytester, "-n", "2", *compare, "--profile-json=spread.json")
    plain.assert_outcomes(passed=4, failed=2)
    spread.assert_outcomes(passed=4, failed=2)
    # The same tests fail on the same metrics, and the same tests pass. Which line a verdict
    # names, and which minor lines cross the reporting share, depends on where a test's 1-3
    # samples fell, so only the line that carries the slowed work is pinned: as a line verdict,
    # or, when the baseline's few samples missed it (a new line), in the test's verdict.
    plain_verdicts = _verdicts(profile_of(pytester, "plain.json"))
    spread_verdicts = _verdicts(profile_of(pytester, "spread.json"))
    assert _outcomes(plain_verdicts) == _outcomes(spread_verdicts)
    for name in ("plain.json", "spread.json"):
        slowed = profile_of(pytester, name)["tests"]["test_x.py::test_slowed"]["verdicts"]
        failed = [v for v in slowed if v["metric"] == "cpu_s" and not v["passed"]]
        assert any("test_x.py:10 crunch" in (v["line"] or v["message"]) for v in failed), slowed


@pytest.mark.slow
def test_junit_properties_and_markdown_summary(pytester):
    pytester.makepyfile(
        test_mod=WORKLOAD.replace(
            "def test_crunch():",
            "import pytest\n\n\n@pytest.mark.perf_budget(cpu_s=0.001)\ndef test_crunch():",
        )
    )
    result = run(
        pytester,
        "--profile",
        "--profile-memory=no",
        "--junitxml=junit.xml",
        "--profile-markdown=summary.md",
    )
    result.assert_outcomes(passed=1, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    cases = {c.get("name"): c for c in ET.parse(pytester.path / "junit.xml").iter("testcase")}
    props = {p.get("name"): p.get("value") for p in cases["test_crunch"].iter("property")}
    assert float(props["scalene_cpu_s"]) > 0.001
    assert props["scalene_gates"].startswith("failed: CPU time ")
    assert "scalene_cpu_s" in {p.get("name") for p in cases["test_small"].iter("property")}
    summary = (pytester.path / "summary.md").read_text()
    assert "**1 of 1 gates failed** in 1 of 2 profiled tests (budget: 1)." in summary
    assert "| `test_mod.py::test_crunch` | budget | cpu_s | 0.001 s |" in summary
    assert "`total += i * i % 7`" in summary  # the top lines, with their source


@pytest.mark.slow
@needs_shim
def test_baselines_hold_memory_and_a_one_sided_metric_is_reported(pytester):
    pytester.makepyfile(
        test_mem="import numpy as np\n\n\ndef test_big():\n    assert np.ones(20_000_000).sum()\n"
    )
    nodeid, stored_at = "test_mem.py::test_big", pytester.path / "baselines" / "test_mem.py.json"

    def notes_of_compare(*args: str) -> list[str]:
        run(pytester, "--profile-compare", "--profile-json=p.json", *args).assert_outcomes(passed=1)
        return profile_of(pytester, "p.json")["tests"][nodeid]["baseline"]["notes"]

    run(pytester, "--profile-save-baseline").assert_outcomes(
        passed=1
    )  # memory on without --profile
    assert json.loads(stored_at.read_text())["tests"][nodeid]["metrics"]["peak_mb"] > 150
    notes = notes_of_compare("--profile-memory=no")
    assert any("not compared: the baseline has it" in n for n in notes), notes

    run(pytester, "--profile-save-baseline", "--profile-memory=no").assert_outcomes(passed=1)
    notes = notes_of_compare()
    assert any("not compared: this run measured it but the baseline has none" in n for n in notes)
