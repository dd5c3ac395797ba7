"""The millisecond-suite benchmark's verdict (benchmarks/ms_suite.py): pass or MISSED only when
the median's 95% interval lies on one side of the target, since one round's ratio moves by
tens of percent on a shared machine."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import load_module

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
for sibling in ("ms_suite_notes", "alternate"):  # the script imports them
    load_module(sibling, BENCHMARKS / f"{sibling}.py")
bench = load_module("ms_suite", BENCHMARKS / "ms_suite.py")


def test_median_interval_is_the_binomial_order_statistics():
    # 25 values with wild outliers at both ends: the interval is the 8th and 18th, whatever
    # the tails hold (a mean +- spread would be dragged by them).
    values = [-1000.0] * 3 + [float(i) for i in range(1, 20)] + [1000.0] * 3
    assert len(values) == 25
    assert bench.median_interval(values) == (5.0, 15.0)  # sorted[7], sorted[17]
    assert bench.median_interval([float(i) for i in range(1, 11)]) == (2.0, 9.0)
    assert bench.median_interval([3.0, 1.0, 2.0]) == (1.0, 3.0)  # too few: the whole range


def test_verdict_says_not_settled_when_the_interval_spans_the_target():
    under = [1.00 + 0.001 * i for i in range(25)]  # all within 1.00-1.024
    assert bench._verdict(under, 1.05, 0.1) == "pass"
    assert bench._verdict([r + 0.1 for r in under], 1.05, 0.1) == "**MISSED**"
    # Median 1.046, under the target, but near half the rounds above it: no verdict either way.
    straddling = [0.95 + 0.008 * i for i in range(25)]
    assert bench._verdict(straddling, 1.05, 0.1).startswith("not settled")
    assert bench._verdict(under, 1.05, bench.TARGET_MS + 0.1) == "**MISSED**"  # per-test cost


def test_startup_is_judged_on_the_paired_extra_of_each_round():
    # Plain's start-up swings by 0.35 s between rounds; each round's profiled session follows it
    # +0.02 s (CPU only) or +0.08 s (full). Taken round by round, the extras are exact and the
    # verdicts settle; against plain's median they would spread by the swing and settle neither.
    plain = [0.3, 0.6, 0.4, 0.5, 0.35, 0.55, 0.45, 0.65, 0.32, 0.62, 0.42]
    results = {
        "baseline": "no_plugin",
        "startup_cpu_s": {
            "no_plugin": plain,
            "plain": [p + 0.01 for p in plain],
            "cpu_only": [p + 0.02 for p in plain],
            "full": [p + 0.08 for p in plain],
        },
    }
    assert bench._startup_extras(results, "cpu_only") == pytest.approx([0.02] * len(plain))
    text = "\n".join(bench._startup_text(results))
    assert "| CPU only | +0.020 s | +0.010 s | pass |" in text
    assert "| full (CPU + memory + copy) | +0.080 s | +0.070 s | **MISSED** |" in text
    assert "| installed, not profiling | +0.010 s |  | (no target) |" in text
    assert bench._startup_text({"cpu_s": {}}) == []  # a run from before the measurement
