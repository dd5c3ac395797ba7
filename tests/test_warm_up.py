"""A baseline does not depend on which test ran first: the process's warm-up (an import made on
first use, a cache filled on the first call) is charged to its first profiled test, so a test
that ran first on one side only has its CPU time not compared, with a note (gates/judging.py).
Under --lf an unchanged test read -56% against a baseline saved when it ran first."""

from __future__ import annotations

import json
import re

import pytest

SUITE = """
_table = None


def table():
    # Filled on first use, in whichever test runs first: ~0.3 s of CPU, once per process.
    global _table
    if _table is None:
        _table = [i * i % 7 for i in range(3_000_000)]
    return _table


def test_a():
    assert sum(table()[:1000]) > 0


def test_b():
    assert sum(table()[1000:2000]) > 0
"""


def _cpu_findings(pytester: pytest.Pytester) -> dict[str, list[str]]:
    tests = json.loads((pytester.path / "p.json").read_text())["tests"]
    return {
        nodeid.split("::")[1]: [
            v["message"] for v in test.get("verdicts", []) if v["metric"] == "cpu_s"
        ]
        + [n for n in test["baseline"]["notes"] if "CPU time" in n]
        for nodeid, test in tests.items()
    }


def test_the_same_test_first_or_not_reads_the_same_verdict(pytester):
    pytester.makepyfile(test_warm=SUITE)
    flags = ("-p", "no:cacheprovider", "--profile", "--profile-memory=no")
    pytester.runpytest_subprocess(*flags, "--profile-save-baseline").assert_outcomes(passed=2)
    # Saved in the order a, b (a paid the warm-up); compared in the order b, a.
    result = pytester.runpytest_subprocess(
        *flags,
        "--profile-compare",
        "--profile-json=p.json",
        "test_warm.py::test_b",
        "test_warm.py::test_a",
    )
    result.assert_outcomes(passed=2)
    found = _cpu_findings(pytester)
    # b now ran first (this run's figure is warm-up), a's baseline was saved first: neither
    # is judged, and nothing reads as a regression, a cleared suspect or an improvement.
    assert found["test_b"] == [
        "CPU time not compared: this run's CPU time is its session's first profiled call (not "
        "the baseline's), which carries the process's warm-up (imports, first calls, caches); it "
        "is compared when both sides ran first or neither did, or with --profile-repeat=2 or "
        "more on both sides (warm runs)"
    ]
    [note] = found["test_a"]
    assert note.startswith("CPU time not compared: the baseline's CPU time was saved from")
    saved = json.loads((pytester.path / "baselines" / "test_warm.py.json").read_text())
    assert saved["tests"]["test_warm.py::test_a"]["cpu"]["warm_up"] == 1
    assert "warm_up" not in saved["tests"]["test_warm.py::test_b"]["cpu"]


def test_a_test_first_on_both_sides_is_compared(pytester):
    pytester.makepyfile(test_warm=SUITE)
    flags = ("-p", "no:cacheprovider", "--profile", "--profile-memory=no")
    pytester.runpytest_subprocess(*flags, "--profile-save-baseline").assert_outcomes(passed=2)
    result = pytester.runpytest_subprocess(*flags, "--profile-compare", "--profile-json=p.json")
    result.assert_outcomes(passed=2)
    found = _cpu_findings(pytester)
    ok_verdict = re.compile(r"CPU time [0-9.]+ (s|ms|us) ")
    assert [bool(ok_verdict.match(m)) for m in found["test_a"]] == [True]
    assert [bool(ok_verdict.match(m)) for m in found["test_b"]] == [True]
