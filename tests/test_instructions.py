"""Instruction counts under callgrind (--profile-measure=instructions, instructions budgets):
the callgrind reader, the culprit rule, the baseline format, and the plugin end to end against
real valgrind (skipped, saying so, where valgrind is not installed)."""

from __future__ import annotations

import os
import shutil
import sys
import textwrap

import pytest

from pytest_scalene.gates.baseline_store import (
    BaselineError,
    ModuleBaseline,
    TestEntry,
    dumps,
    loads,
)
from pytest_scalene.gates.budgets import BudgetError, parse_value
from pytest_scalene.gates.comparison import NoiseRule, compare
from pytest_scalene.instructions import callgrind_out, runner

needs_valgrind = pytest.mark.skipif(
    shutil.which("valgrind") is None, reason="valgrind is not installed (apt-get install valgrind)"
)
PER_FUNCTION = sys.version_info >= (3, 12)  # the perf trampoline names Python functions

DUMP = """# callgrind format
version: 1
creator: callgrind-3.19.0
desc: Trigger: Client Request: pytest-scalene#3

positions: line
events: Ir
summary: 0

fn=(1) 0x0000000000001000
5 10
cfn=(2) _PyEval_EvalFrameDefault
calls=1 0
5 1000
fn=(3) 0x0000000000002000
+1 20
cfn=(2)
calls=2 0
* 400
fn=(2)
0 1400
fn=(4) malloc
3 7
fn=(1)
6 5

totals: 1842
"""
PERF_MAP = """1000 40 py::work:/src/test_w.py
2000 40 py::helper:/src/test_w.py
3000 40 py::<module>:/src/other.py
"""


def test_callgrind_dump_inclusive_costs_and_python_names(tmp_path):
    (tmp_path / "out").write_text(DUMP)
    (tmp_path / "map").write_text(PERF_MAP)
    dump = callgrind_out.parse(tmp_path / "out")
    assert dump.label == "pytest-scalene#3"
    assert dump.total == 1842
    # self cost, then self plus the inclusive cost of its calls (compressed names resolved)
    assert dump.self_cost["0x0000000000001000"] == 15
    assert dump.inclusive["0x0000000000001000"] == 1015
    assert dump.inclusive["0x0000000000002000"] == 420
    assert dump.self_cost["_PyEval_EvalFrameDefault"] == 1400
    named = callgrind_out.python_functions(dump, callgrind_out.read_perf_map(tmp_path / "map"))
    assert named == {"work:/src/test_w.py": 1015, "helper:/src/test_w.py": 420}


def test_not_a_callgrind_file(tmp_path):
    (tmp_path / "x").write_text("hello\n")
    with pytest.raises(ValueError, match="not a callgrind output"):
        callgrind_out.parse(tmp_path / "x")


def test_child_keeps_only_the_options_that_shape_collection():
    args = ["-x", "-p", "myplugin", "-oaddopts=", "tests/", "--import-mode=importlib", "-k", "a"]
    assert runner.kept_arguments(args) == [
        "-p",
        "myplugin",
        "-oaddopts=",
        "--import-mode=importlib",
    ]


def _entry(total: int, functions: dict[str, int], env: dict[str, str] | None = None) -> TestEntry:
    return TestEntry(
        {"instructions": float(total)},
        (),
        0.001,
        functions,
        env if env is not None else {"python": "3.x"},
        {name: f"{name.replace('::', ':1 ')}" for name in functions},
    )


RULE = NoiseRule()


def test_the_callee_that_grew_is_named_not_its_callers():
    base = _entry(10**7, {"t.py::test": 10**7, "t.py::outer": 5 * 10**6, "t.py::inner": 2 * 10**6})
    slow = _entry(
        10_200_000, {"t.py::test": 10_200_000, "t.py::outer": 5_200_000, "t.py::inner": 2_200_000}
    )
    (failed,) = [f for f in compare(base, slow, RULE).findings if f.failed]
    assert failed.line == "t.py:1 inner" and "+10%" in failed.message, failed


def test_a_function_regression_fails_when_the_total_stays_within_tolerance():
    base = _entry(10**7, {"t.py::test": 10**7, "t.py::small": 10**6})
    slow = _entry(10_100_000, {"t.py::test": 10_100_000, "t.py::small": 1_100_000})  # +1%, +10%
    failed = [f for f in compare(base, slow, RULE).findings if f.failed]
    assert len(failed) == 1 and "small" in failed[0].message


def test_unchanged_counts_pass():
    base = _entry(10**7, {"t.py::test": 10**7, "t.py::small": 10**6})
    same = _entry(10_003_000, {"t.py::test": 10_003_000, "t.py::small": 1_001_000})
    assert not [f for f in compare(base, same, RULE).findings if f.failed]


def test_counts_from_another_environment_are_a_note_not_a_failure():
    base = _entry(1000, {}, {"python": "cpython 3.11.7", "package numpy": "2.4.6"})
    other = _entry(2000, {}, {"python": "cpython 3.11.7", "package numpy": "2.5.5"})
    findings = compare(base, other, RULE).findings
    assert not [f for f in findings if f.failed]
    (note,) = [f for f in findings if f.kind == "not_compared"]
    assert "package numpy" in note.message and "2.5.5" in note.message


def test_counts_from_a_checkout_elsewhere_are_judged_and_a_regression_names_the_move():
    # Where the checkout lies moves the counts of code that resolves paths (+3% on a hot path in
    # a deeper CI checkout): never "not compared" for that (most tests resolve no path), but
    # a regression says its baseline was counted elsewhere.
    here = {"python": "3.x", "paths": "checkout 2 directories, 10 characters; interpreter x"}
    there = {**here, "paths": "checkout 9 directories, 70 characters; interpreter x"}
    base = _entry(10**7, {}, here)
    same = compare(base, _entry(10_003_000, {}, there), RULE).findings
    assert not [f for f in same if f.failed or f.kind == "not_compared"], same
    (failed,) = [f for f in compare(base, _entry(10**7 * 1.1, {}, there), RULE).findings]
    assert failed.failed and "counted with its paths elsewhere (checkout 2 directories" in (
        failed.message
    )
    (failed,) = [f for f in compare(base, _entry(10**7 * 1.1, {}, here), RULE).findings]
    assert "elsewhere" not in failed.message


def test_the_counts_environment_has_the_paths_shape_not_the_paths(tmp_path):
    deep = tmp_path / "a" / "b" / "c"
    deep.mkdir(parents=True)
    shallow, deeper = runner.path_shape(tmp_path), runner.path_shape(deep)
    assert shallow != deeper and str(tmp_path) not in shallow
    assert deeper.startswith(f"{str(deep.resolve()).count(os.sep)} directories")
    env = runner.environment("valgrind-3.19.0", deep)
    assert env["paths"].startswith(f"checkout {deeper}; interpreter ")


def test_baseline_file_round_trip_and_strict_reading():
    entry = _entry(123, {"t.py::f": 100}, {"python": "3.11"})
    baseline = ModuleBaseline("t.py", 0.01, "cpu", 1, {"t.py::test": entry})
    read = loads(dumps(baseline), "b.json").tests["t.py::test"]
    assert (read.metrics, read.functions, read.environment) == (
        entry.metrics,
        entry.functions,
        entry.environment,
    )
    broken = dumps(baseline).replace('"t.py::f": 100', '"t.py::f": -1')
    with pytest.raises(BaselineError, match=r"functions\['t.py::f'\]"):
        loads(broken, "b.json")


def test_instruction_budget_values():
    assert parse_value("instructions", "25M") == 25e6
    assert parse_value("instructions", "1.5 G") == 1.5e9
    assert parse_value("instructions", 800_000) == 800_000
    with pytest.raises(BudgetError, match="expected a count"):
        parse_value("instructions", "25 MB")


# -- end to end, under real valgrind -------------------------------------------------------------
SUITE = """
import os

SLOW = float(os.environ.get("SLOW", "1"))


def steady(n):
    acc = 0
    for i in range(n):
        acc += i * i % 7
    return acc


def spin(n):
    acc = 0
    for i in range(int(n * SLOW)):
        acc += i * i % 5
    return acc


def test_work():
    assert steady(30_000) + spin(30_000) > 0


def test_one_ms():  # ~1 ms natively: a 1.1x spin adds ~10**5 instructions, over the floor
    assert steady(10_000) + spin(10_000) > 0
"""


def _run(pytester: pytest.Pytester, *args: str, slow: str = "1") -> pytest.RunResult:
    os.environ["SLOW"] = slow
    try:
        # --profile-select=all: the slowdown comes from an environment variable, which the
        # code map cannot see (docs/selection.md); these tests are about the counts.
        return pytester.runpytest_subprocess(
            "-p",
            "no:cacheprovider",
            "--profile-measure=instructions",
            "--profile-select=all",
            *args,
        )
    finally:
        del os.environ["SLOW"]


@pytest.mark.version_independent
@needs_valgrind
def test_saved_counts_pass_unchanged_and_fail_on_a_1_1x_function(pytester):
    pytester.makepyfile(test_work=SUITE)
    _run(pytester, "--profile-save-baseline").assert_outcomes(passed=2)
    for _ in range(2):
        _run(pytester, "--profile-compare").assert_outcomes(passed=2)
    result = _run(pytester, "--profile-compare", slow="1.1")
    result.assert_outcomes(failed=2)
    text = result.stdout.str()
    assert text.count("instructions regressed") >= 2, text
    if PER_FUNCTION:
        assert "test_work.py:" in text and " spin: inclusive " in text, text
    else:
        assert text.count("no function named: per-function counts need Python 3.12+") >= 2, text


@pytest.mark.version_independent
@needs_valgrind
def test_other_environment_is_a_note(pytester):
    pytester.makepyfile(test_work=SUITE)
    _run(pytester, "--profile-save-baseline").assert_outcomes(passed=2)
    path = pytester.path / "baselines" / "test_work.py.json"
    path.write_text(path.read_text().replace('"hash_seed": "0"', '"hash_seed": "1"'))
    result = _run(pytester, "--profile-compare", "-v", slow="1.5")
    result.assert_outcomes(passed=2)
    assert "instructions not compared: counted in another environment (hash_seed" in (
        result.stdout.str()
    )


@pytest.mark.version_independent
@needs_valgrind
def test_instruction_budget_in_plain_pytest(pytester):
    pytester.makepyfile(
        test_budget=textwrap.dedent(
            """
            import pytest

            @pytest.mark.perf_budget(instructions="50M")
            def test_within():
                sum(i * i for i in range(1000))

            @pytest.mark.perf_budget(instructions=100_000)
            def test_over():
                sum(i * i for i in range(100_000))
            """
        )
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*test_over*instructions * M > budget 0.100 M*"])


@pytest.mark.version_independent
@needs_valgrind
def test_xdist_workers_count_once_and_each_judges_its_tests(pytester, tmp_path, monkeypatch):
    """Every xdist worker collects every test: one counting session serves them all."""
    runs = tmp_path / "counting-runs.txt"
    monkeypatch.setenv("COUNTED_RUNS", str(runs))
    pytester.makepyfile(
        test_budget=textwrap.dedent(
            """
            import os
            import pytest

            def note():
                if os.environ.get("PYTEST_SCALENE_COUNTING"):
                    with open(os.environ["COUNTED_RUNS"], "a") as f:
                        f.write("run\\n")

            @pytest.mark.perf_budget(instructions="50M")
            def test_within():
                note()
                sum(i * i for i in range(1000))

            @pytest.mark.perf_budget(instructions=100_000)
            def test_over():
                note()
                sum(i * i for i in range(100_000))
            """
        )
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*test_over*instructions * M > budget 0.100 M*"])
    assert runs.read_text().count("run") == 2, runs.read_text()  # each test once, not per worker


@pytest.mark.version_independent
@needs_valgrind
def test_a_test_that_hangs_only_under_valgrind_ends_by_the_scaled_timeout(pytester):
    """The user's pytest-timeout limit, scaled to callgrind's speed, ends the counting session."""
    pytester.makepyfile(
        test_hang=textwrap.dedent(
            """
            import os
            import time
            import pytest

            @pytest.mark.perf_budget(instructions="50M")
            def test_hangs_when_counted():
                if os.environ.get("PYTEST_SCALENE_COUNTING"):
                    time.sleep(3600)
            """
        )
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--timeout=0.05", "-rA", timeout=120
    )
    assert "did not pass in the counting session" in result.stdout.str(), result.stdout.str()


def test_missing_valgrind_is_a_clear_error(pytester, tmp_path, monkeypatch):
    pytester.makepyfile(test_a="def test_a(): pass")
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    result = pytester.runpytest_subprocess("--profile-measure=instructions", "--profile")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--profile-measure=instructions: valgrind is not installed*"])
    assert "Traceback" not in result.stderr.str()


WARMED_SUITE = """
import functools
import os

SLOW = float(os.environ.get("SLOW", "1"))


@functools.lru_cache(maxsize=None)
def table(n):  # built once per process: by whichever test asks first
    return tuple(i * i % 11 for i in range(n))


def test_a_warms():
    assert sum(table(200_000)) > 0


def test_b_slowed():
    acc = 0
    for i in range(int(20_000 * SLOW)):
        acc += i % 3
    assert sum(table(200_000)) + acc > 0
"""


@pytest.mark.version_independent
@needs_valgrind
def test_a_regression_behind_a_warmed_cache_is_judged_not_called_timing(pytester):
    # The second counting session (the confirmation of a count that moved) runs the first
    # session's tests in its order: counting test_b_slowed alone, it would build the table
    # that test_a_warms built for it, read millions more, and be "not judged" as depending on
    # timing (simplejson's own suite: 3 of 10 slowed tests, exit status 1 hiding it).
    pytester.makepyfile(test_warm=WARMED_SUITE)
    _run(pytester, "--profile-save-baseline").assert_outcomes(passed=2)
    result = _run(pytester, "--profile-compare", slow="1.5")
    text = result.stdout.str()
    result.assert_outcomes(passed=1, failed=1)
    assert "test_b_slowed" in text and "instructions regressed" in text, text
    assert "moved between two counting sessions" not in text, text
