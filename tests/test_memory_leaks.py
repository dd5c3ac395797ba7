"""Leak detection (issue 3, Must show #3): 1 MB buffers kept in a module-level list for over a
second are reported at the appending line after 50 MB (Scalene needed ~200 MB); the twin that
drops its buffers is never reported in 20 runs, nor is a twin whose every tracked allocation
(about 40, each a new high-water mark) is freed, which only counting the frees tells apart."""

from __future__ import annotations

import json

import pytest
from conftest import line_at
from shim_support import needs_shim, run_profiled_suite

from pytest_scalene.sampling import leaks

SUITE = r"""
import json, os, time
import pytest

MB = 1 << 20
KEPT = []


def churn(keep):
    start = time.perf_counter()
    for _ in range(50):
        buffer = bytearray(MB)  # ALLOCATE
        if keep:
            KEPT.append(buffer)
        time.sleep(0.021)
    return time.perf_counter() - start


def test_leak():
    seconds = churn(keep=True)
    with open(os.environ["LEAK_TRUTH"], "w") as f:
        json.dump({"mb": 50, "seconds": seconds}, f)


@pytest.mark.parametrize("run", range(20))
def test_clean_twin(run):
    churn(keep=False)


@pytest.mark.parametrize("run", range(3))
def test_growing_clean_twin(run):
    # Each buffer is larger than the last, so each sets a new high-water mark and is tracked
    # (about 40 of them), and each is freed: enough evidence that only the frees keep the line
    # from being reported. The plain twin above sets about 2 marks: it could never be.
    for size in range(1, 41):
        buffer = bytearray(size * MB)  # GROWING
        del buffer
        time.sleep(0.005)
"""


@needs_shim
@pytest.mark.slow
def test_leak_reported_and_clean_twin_never(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    truth_file = pytester.path / "truth.json"
    monkeypatch.setenv("LEAK_TRUTH", str(truth_file))
    tests, path = run_profiled_suite(pytester, "test_leaky", SUITE, passed=24)
    truth = json.loads(truth_file.read_text())

    leaky = tests["test_leaky.py::test_leak"]
    assert truth["seconds"] >= 1.0
    line = line_at(leaky, path, "# ALLOCATE")
    assert line["leak_probability"] > 0.95, line
    [leak] = leaky["leaks"]
    assert (leak["file"], leak["line"]) == ("test_leaky.py", line["line"])
    assert leak["probability"] == line["leak_probability"]
    expected_rate = truth["mb"] / truth["seconds"]
    assert abs(leak["rate_mb_s"] - expected_rate) <= 0.25 * expected_rate, (leak, expected_rate)

    twins = [t for nodeid, t in tests.items() if "test_clean_twin" in nodeid]
    assert len(twins) == 20
    assert all(t["leaks"] == [] for t in twins)
    assert all(ln.get("leak_probability", 0) <= 0.95 for t in twins for ln in t["lines"])

    growing = [t for nodeid, t in tests.items() if "growing_clean_twin" in nodeid]
    assert len(growing) == 3
    for test in growing:
        line = line_at(test, path, "# GROWING")
        # >= 19 tracked allocations, all freed: p = 1 - (f + 1) / (n + 2) <= 0.05; with the
        # frees ignored it would be above 0.95.
        assert line["leak_probability"] <= 0.1, line
        assert test["leaks"] == []


def test_leak_probability_is_laplace() -> None:
    assert leaks.leak_probability(0, 0) == 0.5  # no evidence either way
    assert leaks.leak_probability(18, 0) == 0.95  # not above: 19 unfreed are needed
    assert leaks.leak_probability(19, 0) > 0.95
    assert leaks.leak_probability(10, 10) == pytest.approx(1 - 11 / 12)
    assert 0 <= leaks.leak_probability(40, 1) < leaks.leak_probability(40, 0) < 1
    with pytest.raises(ValueError):
        leaks.leak_probability(3, 4)


def test_leak_report_needs_growth_and_probability() -> None:
    from pytest_scalene.core.model import LineKey

    sure = leaks.LineEvidence(LineKey("t.py", 3, "f"), 30, 0, 60.0)
    unsure = leaks.LineEvidence(LineKey("t.py", 9, "g"), 30, 10, 60.0)
    assert leaks.report([sure, unsure], grew=False, elapsed_s=2.0) == []
    assert leaks.report([sure, unsure], grew=True, elapsed_s=2.0) == [
        {
            "file": "t.py",
            "line": 3,
            "function": "f",
            "probability": sure.probability,
            "rate_mb_s": 30.0,
            "leaked_mb": 0.0,
        }
    ]
    assert leaks.footprint_grew(100 << 20, 102 << 20)
    assert not leaks.footprint_grew(100 << 20, 100 << 20)
