"""pytest-xdist (-n 2) with --profile: workers profile memory as a plain run does, budgets give
the same verdicts, and the controller's JSON, HTML and speedscope files hold every worker's tests.
(Baselines under xdist, and the CPU-only regression verdicts: test_baseline_plugin.py.)"""

from __future__ import annotations

import json
import re

import pytest
from shim_support import QUICK, needs_shim

pytest.importorskip("xdist")

SUITE = """
import os
import subprocess
import sys

import pytest


def crunch(n):
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def grow():
    return bytearray(40_000_000)


@pytest.mark.parametrize("k", range(4))
def test_steady(k):
    assert crunch(1_000_000) >= 0


@pytest.mark.perf_budget(cpu_s=0.001)
def test_over_cpu_budget():
    assert crunch(1_000_000) >= 0


@pytest.mark.perf_budget(peak_mb=200)
def test_within_memory_budget():
    assert len(grow()) > 0


@pytest.mark.perf_budget(peak_mb=10)
def test_over_memory_budget():
    assert len(grow()) > 0


def test_child_not_preloaded():
    code = "import os; print(os.environ.get('LD_PRELOAD', ''))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
    assert "scalene" not in out, out
    assert not [k for k in os.environ if k.startswith("PYTEST_SCALENE_")]
"""
TESTS = 8
OUTPUTS = ("--profile-json=p.json", "--profile-html=p.html", "--profile-speedscope=p.ss.json")


def _outcomes(result: pytest.RunResult) -> dict[str, str]:
    """Each test's outcome from `-rA`'s short summary lines."""
    found = re.findall(r"^(PASSED|FAILED) (\S+)", result.stdout.str(), re.MULTILINE)
    return {nodeid: outcome for outcome, nodeid in found}


def _verdicts(profile: dict) -> set[tuple]:
    return {
        (nodeid, v["kind"], v["metric"], v["passed"])
        for nodeid, test in profile["tests"].items()
        for v in test.get("verdicts", [])
    }


def _html_tests(text: str) -> set[str]:
    match = re.search(r'<script type="application/json" id="profile-data">(.*?)</script>', text)
    assert match, "no profile data in the HTML report"
    return set(json.loads(match.group(1))["tests"])


@needs_shim
@pytest.mark.slow
def test_xdist_profiles_memory_and_matches_a_plain_run(pytester):
    pytester.makepyfile(test_suite=SUITE)
    runs = {}
    for name, extra in (("plain", ()), ("xdist", ("-n", "2"))):
        result = pytester.runpytest_subprocess(
            *QUICK, "-rA", "--profile", *extra, *OUTPUTS, timeout=300
        )
        result.assert_outcomes(passed=TESTS - 2, failed=2)
        runs[name] = result, json.loads((pytester.path / "p.json").read_text())
        html = (pytester.path / "p.html").read_text()
        speedscope = json.loads((pytester.path / "p.ss.json").read_text())

        profile = runs[name][1]
        assert len(profile["tests"]) == TESTS, name
        assert _html_tests(html) == set(profile["tests"]), name
        assert {p["name"] for p in speedscope["profiles"]} == set(profile["tests"]), name
        assert not [n for n in profile.get("notes", []) if "memory" in n], name
        for nodeid, test in profile["tests"].items():
            assert "peak_mb" in test, (name, nodeid)  # the worker had the shim
            if "crunch" in nodeid or "steady" in nodeid:
                assert any(ln["function"] == "crunch" for ln in test["lines"]), (name, nodeid)
        grown = profile["tests"]["test_suite.py::test_within_memory_budget"]
        assert 35 < grown["peak_mb"] < 60, (name, grown["peak_mb"])

    (plain, plain_profile), (spread, spread_profile) = runs["plain"], runs["xdist"]
    assert _outcomes(plain) == _outcomes(spread) and len(_outcomes(plain)) == TESTS
    assert _verdicts(plain_profile) == _verdicts(spread_profile)
    assert ("test_suite.py::test_over_memory_budget", "budget", "peak_mb", False) in _verdicts(
        spread_profile
    )
    assert ("test_suite.py::test_within_memory_budget", "budget", "peak_mb", True) in _verdicts(
        spread_profile
    )


@needs_shim
@pytest.mark.slow
def test_xdist_baselines_hold_every_workers_tests_once(pytester):
    """Two modules spread over two workers: one file per module, with all its tests, memory
    figures included; the controller alone writes them (one 'baseline saved' line each)."""
    body = SUITE.split("@pytest.mark.perf_budget(cpu_s")[0]  # the budget-free tests only
    pytester.makepyfile(test_a=body, test_b=body)
    result = pytester.runpytest_subprocess(
        *QUICK, "-n", "2", "--profile-save-baseline", "--profile-memory=yes", timeout=300
    )
    result.assert_outcomes(passed=8)
    assert result.stdout.str().count("baseline saved:") == 2
    files = sorted(p.name for p in (pytester.path / "baselines").rglob("*.json"))
    assert files == ["code-map.json", "test_a.py.json", "test_b.py.json"]
    code_map = json.loads((pytester.path / "baselines" / "code-map.json").read_text())
    assert len(code_map["tests"]) == 8  # every worker's tests
    files.remove("code-map.json")
    for name in files:
        stored = json.loads((pytester.path / "baselines" / name).read_text())
        assert len(stored["tests"]) == 4, name
        assert all("peak_mb" in json.dumps(t) for t in stored["tests"].values()), name
