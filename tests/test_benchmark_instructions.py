"""Instruction counts of a benchmark test (instructions/benchmark_count.py): per call of the
benchmarked function, after a warm-up call, over enough calls that a call of a few
microseconds slowed 1.2x grows past the gate's floor; pedantic's setup is not counted, and a
comparison counts as many calls as its baseline did."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from test_benchmark_fixture import NO_BENCHMARK, suite

from pytest_scalene.core.model import COUNTED_CALLS_KEY
from pytest_scalene.gates.noise_rule import INSTRUCTIONS_FLOOR, NoiseRule
from pytest_scalene.instructions.benchmark_count import (
    COUNTED_INSTRUCTIONS,
    MAX_COUNTED_CALLS,
    calls_for,
    dumped_total,
)

pytest.importorskip("pytest_benchmark", reason="pytest-benchmark is in the test extras")
needs_valgrind = pytest.mark.skipif(
    shutil.which("valgrind") is None, reason="valgrind is not installed (apt-get install valgrind)"
)
PLUGINS = pytest.mark.parametrize(
    "plugins", [(), NO_BENCHMARK], ids=["pytest-benchmark", "stand-in"]
)

FIRST_CALL_COSTS = """
import pytest
from mylib import work

_cache = {}


def cached_work(n):
    # The first call fills a cache at 5x the cost of a call: the warm-up's, never counted.
    if n not in _cache:
        _cache[n] = work(5 * n)
    return work(n)


def test_call(benchmark):
    benchmark(cached_work, 20_000)


def test_pedantic(benchmark):
    benchmark.pedantic(
        cached_work, setup=lambda: (work(40_000) and ((20_000,), {})), rounds=7
    )


def test_whole():
    work(20_000)
"""
# Calls of a few microseconds; pedantic's setup costs 10 calls, and runs before every call.
SHORT_CALLS = """
from mylib import work


def test_call(benchmark):
    assert benchmark(work, 40) == sum(i * i for i in range(40))


def test_pedantic(benchmark):
    benchmark.pedantic(work, setup=lambda: (work(400) and ((40,), {})), rounds=3)
"""
# work(n) slowed 1.2x: one more iteration in five, the same result.
SLOWED = """
def work(n):
    total = 0
    for i in range(n):
        total += i * i
    for i in range(n // 5):
        total += 0
    return total
"""
# A call of ~2 M instructions (counted once), whose second call costs 5x: the call counted
# must follow as many calls in a comparison as when the baseline was saved.
SECOND_CALL_COSTS = """
from mylib import work

_calls = []


def staged(n):
    _calls.append(n)
    return work(5 * n if len(_calls) == 2 else n)


def test_call(benchmark):
    benchmark(staged, 60_000)
"""
RUN = ("-p", "no:cacheprovider", "--profile", "--profile-measure=instructions")
# Unchanged code is measured only when selection is off (docs/selection.md): a comparison that
# measured nothing would pass whatever the counts.
UNCHANGED = (*RUN, "--profile-compare", "--profile-select=all")


def _saved(pytester: pytest.Pytester, tests: int, *args: str) -> dict[str, dict]:
    pytester.runpytest_subprocess(
        *RUN, "--profile-memory=no", "--profile-save-baseline", *args
    ).assert_outcomes(passed=tests)
    saved = json.loads((pytester.path / "baselines" / "test_bench.py.json").read_text())
    return {nodeid.split("::")[1]: test for nodeid, test in saved["tests"].items()}


def _calls(test: dict) -> int:
    return int(test["instructions"]["environment"].get(COUNTED_CALLS_KEY, "0"))


def test_the_calls_counted_bring_a_call_to_a_million_instructions_in_powers_of_two() -> None:
    assert calls_for(5_000_000) == 1 and calls_for(COUNTED_INSTRUCTIONS) == 1
    assert calls_for(COUNTED_INSTRUCTIONS - 1) == 2
    assert calls_for(3_000) == 512  # 333 wanted
    assert calls_for(0) == calls_for(10) == MAX_COUNTED_CALLS


def test_the_floor_is_a_counts_over_its_calls_when_both_sides_counted_as_many() -> None:
    rule = NoiseRule()
    calls = {COUNTED_CALLS_KEY: "64"}
    assert rule.counted(calls, calls).floor("instructions") == INSTRUCTIONS_FLOOR / 64
    for other in ({}, {COUNTED_CALLS_KEY: "32"}):  # a count of other calls: not compared
        assert rule.counted(calls, other).floor("instructions") == INSTRUCTIONS_FLOOR
    # 1.2x of a 5,000-instruction call over 64 calls: judged; over one call, not
    assert rule.counted(calls, calls).regressed("instructions", 5_000, 6_000)
    assert not rule.regressed("instructions", 5_000, 6_000)


def test_the_probe_is_read_from_the_last_dump_whatever_the_file_times(tmp_path) -> None:
    def dump(number: int, label: str, total: int, pid: int = os.getpid()) -> None:
        path = tmp_path / f"callgrind.out.{pid}.{number}"
        path.write_text(
            f"# callgrind format\ncmd: python -m pytest {'tests/test_x.py::test_y ' * 400}\n"
            f"desc: Trigger: Client Request: {label}\n"
            f"events: Ir\nfn=(1) f\n0 {total}\ntotals: {total}\n"
        )
        os.utime(path, ns=(10**18, 10**18))  # one clock tick: the times tie

    dump(9, "pytest-scalene#3", 5_000_000)
    dump(10, "pytest-scalene#4~probe", 3_000)  # after .9, though it sorts before it as text
    assert dumped_total(tmp_path, "pytest-scalene#4~probe") == 3_000
    assert dumped_total(tmp_path, "pytest-scalene#4") is None  # not a prefix match
    dump(12, "pytest-scalene#4", 7_000, pid=os.getpid() + 1)  # a subprocess's
    (tmp_path / f"callgrind.out.{os.getpid() + 1}").write_text("")  # its last, whole
    assert dumped_total(tmp_path, "pytest-scalene#4~probe") == 3_000
    dump(11, "pytest-scalene#4", 7_000)
    assert dumped_total(tmp_path, "pytest-scalene#4~probe") is None  # not the last one


@needs_valgrind
@PLUGINS
def test_instructions_count_calls_after_a_warm_up(pytester, plugins):
    suite(pytester, FIRST_CALL_COSTS)
    counts = {k: t["metrics"]["instructions"] for k, t in _saved(pytester, 3, *plugins).items()}
    whole = counts["test_whole"]
    # A call of work(20_000), as the test that calls it once: not the warm-up's 5x cache
    # fill, not pedantic's setup (2x), not pytest-benchmark's rounds.
    for name in ("test_call", "test_pedantic"):
        assert 0.9 < counts[name] / whole < 1.2, counts


@needs_valgrind
@PLUGINS
def test_a_short_call_is_counted_over_enough_calls_without_its_setup(pytester, plugins):
    suite(pytester, SHORT_CALLS)
    saved = _saved(pytester, 2, *plugins)
    call, pedantic = saved["test_call"], saved["test_pedantic"]
    for test in (call, pedantic):
        calls = _calls(test)
        assert calls > 8 and calls & (calls - 1) == 0, calls  # a power of two
        # sized by a probe call: the counted calls add up to about a million instructions
        total = calls * test["metrics"]["instructions"]
        assert COUNTED_INSTRUCTIONS / 2 < total < 2.5 * COUNTED_INSTRUCTIONS, (calls, total)
    # setup, 10 calls' worth before each call, is not counted
    ratio = pedantic["metrics"]["instructions"] / call["metrics"]["instructions"]
    assert 0.9 < ratio < 1.1, (call["metrics"], pedantic["metrics"])


@needs_valgrind
def test_a_short_call_slowed_1_2x_is_caught_and_unchanged_passes(pytester):
    suite(pytester, SHORT_CALLS)
    saved = _saved(pytester, 2)
    # the growth of one call is under the floor of a count: only the calls counted reach it
    growth = 0.2 * saved["test_call"]["metrics"]["instructions"]
    assert growth < INSTRUCTIONS_FLOOR < growth * _calls(saved["test_call"])
    for _ in range(2):
        unchanged = pytester.runpytest_subprocess(*UNCHANGED)
        unchanged.assert_outcomes(passed=2)
        unchanged.stdout.fnmatch_lines(["*baseline comparisons 0 failed of *"])
    (pytester.path / "mylib.py").write_text(SLOWED)
    result = pytester.runpytest_subprocess(*RUN, "--profile-compare")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*test_call*", "instructions regressed: * M vs baseline * M*"])
    result.stdout.fnmatch_lines(["*test_pedantic*", "instructions regressed: * M vs baseline * M*"])


@needs_valgrind
def test_the_call_counted_follows_as_many_calls_when_compared(pytester):
    suite(pytester, SECOND_CALL_COSTS)
    saved = _saved(pytester, 1)
    assert _calls(saved["test_call"]) == 1, saved  # a call of over a million instructions
    unchanged = pytester.runpytest_subprocess(*UNCHANGED)
    unchanged.assert_outcomes(passed=1)
    unchanged.stdout.fnmatch_lines(["*baseline comparisons 0 failed of *"])
