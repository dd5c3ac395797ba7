"""Which test and which function an instruction count belongs to: each test its own count,
recursion counted once in a function's figure (never above its test's), figures labelled
inclusive, and no function named where the counts cannot name one (before Python 3.12)."""

from __future__ import annotations

import shutil
import sys
import textwrap

import pytest

from pytest_scalene.gates.baseline_store import TestEntry
from pytest_scalene.gates.comparison import NoiseRule, compare
from pytest_scalene.instructions import callgrind_out, runner

needs_valgrind = pytest.mark.skipif(
    shutil.which("valgrind") is None, reason="valgrind is not installed (apt-get install valgrind)"
)
needs_trampoline = pytest.mark.skipif(
    not hasattr(sys, "activate_stack_trampoline"),
    reason="per-function counts need Python 3.12+ (the perf trampoline); this is "
    f"{sys.version_info.major}.{sys.version_info.minor}",
)
RULE = NoiseRule()

# A test (0x1000) calling fib (0x2000), which calls itself once: callgrind writes the deeper
# activation as 0x2000'2 (--separate-recs), its eval loop as _PyEval_EvalFrameDefault'2.
# Self costs: 5 + 100 + 5 + (300 + 585) + 10 = 1005, the total; fib's outermost call: 900.
RECURSIVE_DUMP = """# callgrind format
version: 1
desc: Trigger: Client Request: pytest-scalene#0
events: Ir
fn=(1) 0x0000000000001000
0 5
cfn=(2) _PyEval_EvalFrameDefault
calls=1 0
0 1000
fn=(2)
0 100
cfn=(3) 0x0000000000002000
calls=1 0
0 900
fn=(3)
0 5
cfn=(4) _PyEval_EvalFrameDefault'2
calls=1 0
0 895
fn=(4)
0 885
cfn=(5) 0x0000000000002000'2
calls=1 0
0 595
fn=(5)
0 10
cfn=(4)
calls=1 0
0 585
totals: 1005
"""
RECURSIVE_MAP = """1000 40 py::test_fib:/src/test_r.py
2000 40 py::fib:/src/test_r.py
"""


def test_a_recursive_function_is_counted_once_never_above_its_test(tmp_path):
    (tmp_path / "out").write_text(RECURSIVE_DUMP)
    (tmp_path / "map").write_text(RECURSIVE_MAP)
    dump = callgrind_out.parse(tmp_path / "out")
    named = callgrind_out.python_functions(dump, callgrind_out.read_perf_map(tmp_path / "map"))
    assert dump.total == 1005
    assert named == {"test_fib:/src/test_r.py": 1005, "fib:/src/test_r.py": 900}


def _entry(total: int, functions: dict[str, int], options: str = "") -> TestEntry:
    return TestEntry(
        {"instructions": float(total)},
        (),
        0.001,
        functions,
        {"python": "3.x", "callgrind_options": options},
        {name: name.replace("::", ":1 ") for name in functions},
    )


def test_a_function_s_figure_is_labelled_inclusive():
    base = _entry(10**6, {"t.py::test": 10**6, "t.py::outer": 500_000, "t.py::inner": 200_000})
    slow = _entry(
        1_100_000, {"t.py::test": 1_100_000, "t.py::outer": 600_000, "t.py::inner": 300_000}
    )
    (failed,) = [f for f in compare(base, slow, RULE).findings if f.failed]
    assert "t.py:1 inner: inclusive 0.300 M vs baseline 0.200 M (+50%" in failed.message
    assert "also t.py:1 outer inclusive +20%" in failed.message, failed.message


@pytest.mark.parametrize(
    ("options", "why"),
    [
        ("--tool=callgrind --instr-atstart=no", "per-function counts need Python 3.12+"),
        ("--tool=callgrind --instr-atstart=no -X perf", "no profiled Python function"),
    ],
)
def test_without_function_counts_a_regression_names_no_function_and_says_why(options, why):
    """Before 3.12 a line picked by sampled CPU time was named: on a small workload it rested
    on a sample or two and named the wrong function. A count that cannot name one says so."""
    from pytest_scalene.gates.baseline_store import LineEntry

    def entry(total: int, hot: float) -> TestEntry:
        lines = (
            LineEntry("t.py", "work", 2, "a = 1", 12, {"cpu_s": 0.2}),
            LineEntry("t.py", "other.<locals>.<genexpr>", 2, "x += 1", 22, {"cpu_s": hot}),
        )
        return TestEntry(
            {"instructions": float(total)}, lines, 0.5, {}, {"callgrind_options": options}
        )

    judged = compare(entry(10**6, 0.3), entry(1_100_000, 0.4), RULE)
    (failed,) = [f for f in judged.findings if f.failed]
    assert failed.line is None and "genexpr" not in failed.message, failed
    assert "instructions regressed: 1.100 M vs baseline 1.000 M (+10%" in failed.message
    assert f"no function named: {why}" in failed.message, failed.message


def test_growth_under_the_floor_is_not_judged_over_it_is():
    """Counts move by a few thousand instructions between sessions of unchanged code (simplejson:
    a 0.5 M test by 1,644, one function in it by 2,000-3,000): under INSTRUCTIONS_FLOOR nothing
    fails."""
    perf = "--tool=callgrind --instr-atstart=no -X perf"
    base = _entry(502_848, {"t.py::test": 502_848, "t.py::error_init": 39_000}, perf)
    noisy = _entry(504_492, {"t.py::test": 504_492, "t.py::error_init": 42_000}, perf)
    assert not [f for f in compare(base, noisy, RULE).findings if f.failed]
    slowed = _entry(552_848, {"t.py::test": 552_848, "t.py::error_init": 89_000}, perf)
    (failed,) = [f for f in compare(base, slowed, RULE).findings if f.failed]
    assert "error_init: inclusive 0.089 M vs baseline 0.039 M" in failed.message, failed.message


def test_a_regression_no_function_explains_names_none_and_says_why():
    """3.12+: the growth is outside the profiled functions (here 5% of the test's count spread
    over code no profiled function calls): no function is named, and the message says why."""
    perf = "--tool=callgrind --instr-atstart=no -X perf"
    base = _entry(1_000_000, {"t.py::small": 100_000}, perf)
    slow = _entry(1_050_000, {"t.py::small": 100_100}, perf)
    (failed,) = [f for f in compare(base, slow, RULE).findings if f.failed]
    assert failed.line is None, failed
    assert (
        "no function named: no profiled Python function's inclusive count grew by more than "
        "+2% and 0.5% of the test's" in failed.message
    ), failed.message


def test_a_generator_expression_is_placed_at_its_enclosing_function(tmp_path):
    """It has no def line of its own, and may have no samples: the message still says where."""
    from pytest_scalene.core.model import TestProfile
    from pytest_scalene.gates.baseline_entry import entry_from_profile

    (tmp_path / "t.py").write_text(
        "import os\n\n\ndef helper(n):\n    return sum(i * i for i in range(n))\n"
    )
    profile = TestProfile("t.py::test_x")
    profile.extra["instructions"] = 1000
    profile.extra["instructions_functions"] = {"t.py::helper.<locals>.<genexpr>": 800}
    entry = entry_from_profile(profile, str(tmp_path))
    assert entry.function_lines == {
        "t.py::helper.<locals>.<genexpr>": "t.py:4 helper.<locals>.<genexpr>"
    }


# -- end to end, under real valgrind -------------------------------------------------------------
LOOPS = """
def spin(n):
    acc = 0
    for i in range(n):
        acc += i * i % 7
    return acc


def test_small():
    assert spin(10_000) > 0


def test_large():
    assert spin(1_000_000) > 0
"""

RECURSIVE = """
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def test_fib():
    assert fib(16) == 987
"""


def _count(pytester: pytest.Pytester, source: str, *tests: str) -> dict[str, runner.Counted]:
    pytester.makepyfile(test_counted=textwrap.dedent(source))
    nodeids = [f"test_counted.py::{name}" for name in tests]
    counts, output = runner.count(nodeids, pytester.path, None, ())
    counted = {n: c for n, c in counts.items() if isinstance(c, runner.Counted)}
    assert counted.keys() == set(nodeids), (counts, output[-3000:])
    return counted


@needs_valgrind  # per Python: before 3.12 the only test here counting under valgrind end to end
def test_each_test_gets_its_own_count(pytester):
    """100x the loop, far more instructions: a count given to the wrong test reads equal."""
    counts = _count(pytester, LOOPS, "test_small", "test_large")
    small = counts["test_counted.py::test_small"].instructions
    large = counts["test_counted.py::test_large"].instructions
    assert large > 20 * small, (small, large)


@needs_valgrind
@needs_trampoline
@pytest.mark.parametrize(
    "valgrind_opts", ["", pytest.param("--separate-recs=1", marks=pytest.mark.version_independent)]
)
def test_a_recursive_function_s_count_stays_within_its_test_s(pytester, monkeypatch, valgrind_opts):
    """Also where the user's VALGRIND_OPTS would merge a recursion's activations."""
    monkeypatch.setenv("VALGRIND_OPTS", valgrind_opts)
    (counted,) = _count(pytester, RECURSIVE, "test_fib").values()
    fib = [v for k, v in counted.functions.items() if k.endswith("::fib")]
    assert fib and fib[0] > counted.instructions / 2, counted.functions  # fib is the work
    over = {k: v for k, v in counted.functions.items() if v > counted.instructions}
    assert not over, (counted.instructions, over)
