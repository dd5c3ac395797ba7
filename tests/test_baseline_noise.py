"""The noise rule on this machine: a saved baseline, ten unchanged re-runs with --profile-compare
that must all pass, then a 2x CPU slowdown in one function and a 3x memory growth in another
that must both fail, each naming its line (docs/baselines.md)."""

from __future__ import annotations

import json
import re

import pytest

SUITE = """
import numpy as np

CPU_SCALE = 1
MEM_SCALE = 1


def steady(n):
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def spin(n):
    total = 0
    for i in range(n):
        total += i * i % 5
    return total


def grow_a(mb):
    block = np.empty(mb * 2**20, dtype=np.uint8)  # untouched pages: next to no CPU time
    return block.nbytes


def grow_b(mb):
    block = np.empty(mb * 2**20, dtype=np.uint8)
    return block.nbytes


def test_work():
    # spin is ~90% of the CPU time, so its 2x is ~+90% on the test's total as well as +100% on
    # its line, both above the +75% tolerance; when it was 2/3 of the test, 2x was +67% on the
    # total, and its line (~0.12 s, a dozen samples) read +46% in 1 of 4 runs. At ~0.55 s the
    # line is past the sampling-error floor (docs/baselines.md, rule 1): at 0.2 s (4M, on a
    # fast core) 2x needed +120%.
    steady(200_000)
    spin(CPU_SCALE * 12_000_000)
    grow_a(MEM_SCALE * 40)
    grow_b(40)
"""

UNCHANGED_RUNS = 10


def _compare(pytester: pytest.Pytester) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--profile", "--profile-compare", "--profile-repeat=3"
    )


@pytest.mark.slow
def test_unchanged_reruns_pass_and_injected_regressions_fail_naming_the_line(pytester):
    pytester.makepyfile(test_work=SUITE)
    # The runs of the save last 10 s (about 50): longer than most of this VM's slow CPU phases
    # (the longest of 110 seen in 270 s lasted 6.5 s), so the fastest run is a fast-phase one
    # (docs/baselines.md, the noise rule).
    saved = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "--profile",
        "--profile-save-baseline",
        "--profile-repeat=10s",
    )
    saved.assert_outcomes(passed=1)
    baseline = json.loads((pytester.path / "baselines" / "test_work.py.json").read_text())
    memory = "peak_mb" in baseline["tests"]["test_work.py::test_work"]["metrics"]

    failures = []
    for attempt in range(UNCHANGED_RUNS):
        result = _compare(pytester)
        if result.ret != 0:
            failures.append(f"run {attempt + 1}:\n" + result.stdout.str()[-3000:])
    assert not failures, "unchanged re-runs failed:\n" + "\n".join(failures)

    pytester.makepyfile(
        test_work=SUITE.replace("CPU_SCALE = 1", "CPU_SCALE = 2").replace(
            "MEM_SCALE = 1", "MEM_SCALE = 3"
        )
    )
    cpu_line = (
        r"CPU time regressed at test_work.py:17 spin `total \+= i \* i % 5`: .*allowed \+75%\)"
    )
    result = _compare(pytester)
    # Where the machine ran measurably slower than at the save through every confirmation round
    # (a phase of over ~30 s), the gate says it cannot tell the 2x from the machine and leaves
    # the CPU not judged (docs/baselines.md, rule 4): exit status 7 or the memory failure, never
    # a pass. Otherwise the slowed line fails.
    excused = re.search(
        r"CPU time not judged: .*, but the machine runs \d+\.\d\dx slower than when the "
        r"baseline was saved",
        " ".join(result.stdout.str().split()),
    )
    if excused is None:
        result.stdout.re_match_lines([cpu_line])
    if memory or excused is None:
        result.assert_outcomes(failed=1)
    else:
        result.assert_outcomes(passed=1)
        assert result.ret == 7
    if not memory:
        pytest.skip(
            "the memory half needs the memory shim, which was not active in the runs "
            "(pytest_scalene._native.shim_loaded() was False): no peak_mb in the baseline"
        )
    result.stdout.re_match_lines(
        [
            r"peak memory regressed at test_work.py:22 grow_a `block = np.empty\(mb \* 2\*\*20, "
            r"dtype=np.uint8\) # untouched pages: next to no CPU time`: "
            r"120\.\d MB vs baseline 40\.\d MB, the test's peak \(40\.\d MB on this line; "
            r"\+\d+%, allowed \+25%\)"
        ]
    )
