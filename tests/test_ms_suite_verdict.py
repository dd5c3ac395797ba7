"""The millisecond-suite benchmark's verdict (benchmarks/ms_suite.py): pass or MISSED only when
the median's 95% interval lies on one side of the target, since one round's ratio moves by
tens of percent on a shared machine."""

from __future__ import annotations

from pathlib import Path

from conftest import load_module

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "ms_suite.py"
bench = load_module("ms_suite", SCRIPT)


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
