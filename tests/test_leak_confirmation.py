"""Leaks people can act on (issue 23): the terminal names each likely leak's test, line,
function, rate and size; a cache that fills once (functools.lru_cache, a dict memo) is held, not
a leak, because it does not grow when the test runs again; a leak spread thinly over many tests
is reported at its line. End to end under `pytest --profile`, plus the judging functions on
synthetic data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from shim_support import QUICK, needs_shim

from pytest_scalene.core.model import SessionProfile, TestProfile
from pytest_scalene.gates.leak_confirm import NOT_REPEATABLE
from pytest_scalene.reports.terminal_summary import render_summary
from pytest_scalene.sampling import leaks

MB = 1 << 20
BLOCK = 100_000  # bytes kept per call
CALLS = 500  # 47.7 MB per test: ~48 of the score's ~1 MB steps, p = 0.98 (19 are needed)

HELPERS = r"""
import functools

KEPT = []
MEMO = {}
THIN = []


def hot(i):
    KEPT.append(bytearray(100_000))  # LEAK
    return i


@functools.lru_cache(maxsize=None)
def cached(i):
    return bytearray(100_000)  # LRU


def memo(i):
    if i not in MEMO:
        MEMO[i] = bytearray(100_000)  # MEMO
    return MEMO[i]


def leak_a_little():
    THIN.append(bytearray(400_000))  # THIN
"""

LEAK_AND_CACHES = r"""
import warnings
from helpers import cached, hot, memo

CALLS = 500
RUNS = []


def test_leaky_hot_path():
    for i in range(CALLS):
        hot(i)


def test_lru_cache():
    for i in range(CALLS):
        cached(i)


def test_dict_memo():
    warnings.warn("once per run of the test")
    for i in range(CALLS):
        memo(i)


def test_passes_once_only():
    # Leaks like test_leaky_hot_path, then fails when run again: it still passes, once.
    RUNS.append(None)
    assert len(RUNS) == 1
    for i in range(CALLS):
        hot(i)


def test_fails_while_leaking():
    for i in range(CALLS):
        hot(i)
    assert False, "fails on purpose"
"""

THIN = r"""
import pytest
from helpers import leak_a_little


@pytest.mark.parametrize("n", range(40))
def test_thin(n):
    leak_a_little()
"""


def _line_of(path: Path, marker: str) -> int:
    return next(i for i, s in enumerate(path.read_text().splitlines(), 1) if marker in s)


def _run(pytester: pytest.Pytester, suite: str, *args: str) -> tuple[pytest.RunResult, dict]:
    pytester.makepyfile(helpers=HELPERS, test_suite=suite)
    out = pytester.path / "profile.json"
    result = pytester.runpytest_subprocess(
        "--profile", f"--profile-json={out}", *QUICK, *args, timeout=300
    )
    return result, json.loads(out.read_text())["tests"]


@needs_shim
@pytest.mark.slow
def test_terminal_names_the_leaks_test_line_rate_and_size(pytester: pytest.Pytester) -> None:
    result, tests = _run(pytester, LEAK_AND_CACHES, "-W", "always::UserWarning")
    # The run again of each suspect changes no count: the re-run's warning, its failure.
    result.assert_outcomes(passed=4, failed=1, warnings=1)
    line = _line_of(pytester.path / "helpers.py", "# LEAK")
    [leak] = tests["test_suite.py::test_leaky_hot_path"]["leaks"]
    assert (leak["file"], leak["line"], leak["function"]) == ("helpers.py", line, "hot")
    truth = CALLS * BLOCK / MB
    assert abs(leak["leaked_mb"] - truth) <= 0.1 * truth, leak
    assert abs(leak["again_mb"] - truth) <= 0.1 * truth, leak
    summary = result.stdout.str().split("pytest-scalene profile")[-1]
    assert "Likely leaks" in summary, summary
    # The test, then where, the rate and the size, on the lines under it.
    listed = summary.split("Likely leaks")[1].splitlines()
    at = next(i for i, s in enumerate(listed) if "test_suite.py::test_leaky_hot_path" in s)
    text = " ".join(" ".join(listed[at + 1 : at + 3]).split())  # wrapped at any width
    assert f"helpers.py:{line} in hot" in text, text
    assert " MB/s" in text and f"{leak['leaked_mb']:.1f} MB kept" in text, text


@needs_shim
@pytest.mark.slow
def test_a_cache_that_fills_once_is_held_not_a_leak(pytester: pytest.Pytester) -> None:
    result, tests = _run(pytester, LEAK_AND_CACHES)
    result.assert_outcomes(passed=4, failed=1)
    assert tests["test_suite.py::test_leaky_hot_path"]["leaks"], "the real leak is flagged"
    for name, marker in (("test_lru_cache", "# LRU"), ("test_dict_memo", "# MEMO")):
        test = tests[f"test_suite.py::{name}"]
        assert test["leaks"] == [], (name, test["leaks"])
        [held] = test["held"]
        assert held["line"] == _line_of(pytester.path / "helpers.py", marker)
        assert held["why"] == leaks.DID_NOT_GROW
    # Suspects that could not be run again safely are held, saying why, never flagged.
    once = tests["test_suite.py::test_passes_once_only"]
    assert once["outcome"] == "passed" and once["leaks"] == []
    assert "failed (AssertionError" in once["held"][0]["why"], once["held"]
    failing = tests["test_suite.py::test_fails_while_leaking"]
    assert failing["leaks"] == [] and failing["held"][0]["why"] == leaks.NOT_RUN_AGAIN
    summary = " ".join(result.stdout.str().split("pytest-scalene profile")[-1].split())
    assert "1 likely leak 4 held" in summary and "held (did not grow when run again)" in summary


@needs_shim
@pytest.mark.slow
def test_a_leak_thin_over_many_tests_is_reported_at_its_line(pytester: pytest.Pytester) -> None:
    result, tests = _run(pytester, THIN)
    result.assert_outcomes(passed=40)
    line = _line_of(pytester.path / "helpers.py", "# THIN")
    kept = [
        r["mb"] for t in tests.values() for r in t["retained"] if r["line"] == line
    ]  # 400 KB each: under the score's ~1 MB step, no test has a suspect
    truth = 40 * 400_000 / MB
    assert truth * 0.8 <= sum(kept) <= truth * 1.1, kept
    assert all(t["leaks"] == [] and t["held"] == [] for t in tests.values())
    summary = result.stdout.str().split("pytest-scalene profile")[-1]
    assert "Memory retained across tests" in summary, summary
    assert f"helpers.py:{line} in leak_a_little (" in summary, summary


@needs_shim
@pytest.mark.slow
def test_the_leak_gate_fails_a_confirmed_leak_only(pytester: pytest.Pytester) -> None:
    result, tests = _run(pytester, LEAK_AND_CACHES, "--profile-budget=leaks=false")
    # The caches and the test that leaks but fails when run again pass; the leak fails.
    result.assert_outcomes(passed=3, failed=2)
    line = _line_of(pytester.path / "helpers.py", "# LEAK")
    result.stdout.fnmatch_lines([f"*1 leak detected, budget leaks=False*helpers.py:{line}*"])
    assert tests["test_suite.py::test_leaky_hot_path"]["outcome"] == "failed"
    for name in ("test_lru_cache", "test_dict_memo", "test_passes_once_only"):
        assert tests[f"test_suite.py::{name}"]["outcome"] == "passed", name


@needs_shim
@pytest.mark.slow
def test_a_test_that_is_not_repeatable_is_not_run_again(pytester: pytest.Pytester) -> None:
    result, tests = _run(pytester, LEAK_AND_CACHES, "--profile-repeat=2")
    result.assert_outcomes(passed=4, failed=1)
    once = tests["test_suite.py::test_passes_once_only"]
    assert once["leaks"] == [] and [h["why"] for h in once["held"]] == [NOT_REPEATABLE]
    assert tests["test_suite.py::test_leaky_hot_path"]["leaks"], "repeats confirm nothing"


# -- the judging functions, on synthetic figures ---------------------------------------------------
def test_retained_splits_the_net_growth_by_the_allocations_still_held() -> None:
    from pytest_scalene.core.model import LineKey

    a, b, c = LineKey("a.py", 1, "f"), LineKey("a.py", 2, "g"), LineKey("a.py", 3, "h")
    found = leaks.retained(30 * MB, {a: 2, b: 1, c: 0})
    assert [(r["line"], r["function"], r["mb"]) for r in found] == [(1, "f", 20.0), (2, "g", 10.0)]
    assert leaks.retained(0, {a: 5}) == [] and leaks.retained(-MB, {a: 5}) == []
    assert leaks.retained(MB, {a: 0}) == []


def test_a_suspect_is_confirmed_only_when_it_kept_again() -> None:
    assert leaks.confirmed(40.0, 39.0) and leaks.confirmed(40.0, 20.0)
    assert not leaks.confirmed(40.0, 19.9)  # grew again, but less than half: a cache's tail
    assert not leaks.confirmed(40.0, 0.0) and not leaks.confirmed(0.0, 0.0)


def _retained(line: int, mb: float, function: str = "helper") -> dict:
    return {"retained": [{"file": "lib.py", "line": line, "function": function, "mb": mb}]}


def test_session_retained_needs_10_mb_over_two_tests_or_more() -> None:
    thin = [_retained(5, 0.4) for _ in range(40)]  # 16 MB over 40 tests
    under = [_retained(7, 0.2) for _ in range(40)]  # 8 MB
    alone = [_retained(9, 30.0)]  # one test's own: its suspect's to judge
    [row] = leaks.session_retained([*thin, *under, *alone])
    assert (row.line, row.function, row.tests) == (5, "helper", 40)
    assert row.mb == pytest.approx(16.0)


def test_summary_lists_leaks_held_and_retained_lines(tmp_path: Path) -> None:
    (tmp_path / "lib.py").write_text("def hot():\n    KEPT.append(bytearray(100_000))\n")
    session = SessionProfile(interval_s=0.01, clock="cpu")
    nodeid = "tests/integration/very/deep/suite/test_module.py::TestClass::test_hot_path[case-1]"
    leaky = session.tests[nodeid] = TestProfile(nodeid, outcome="passed", elapsed_s=1.0)
    leaky.extra["leaks"] = [
        {"file": "lib.py", "line": 2, "function": "hot", "probability": 0.98,
         "rate_mb_s": 47.7, "leaked_mb": 47.7, "again_mb": 47.6}
    ]  # fmt: skip
    cache = session.tests["t.py::test_cache"] = TestProfile("t.py::test_cache", outcome="passed")
    cache.extra["held"] = [
        {"file": "lib.py", "line": 9, "function": "cached", "probability": 0.98,
         "rate_mb_s": 30.0, "leaked_mb": 28.6, "why": leaks.DID_NOT_GROW}
    ]  # fmt: skip
    for n in range(40):
        session.tests[f"t.py::test_thin[{n}]"] = TestProfile(
            f"t.py::test_thin[{n}]", extra=_retained(2, 0.4, "hot")
        )
    text = render_summary(session, str(tmp_path), width=80)
    section = text.split("Likely leaks")[1].split("Per test details")[0]
    assert max(len(s) for s in section.splitlines()) <= 80, section
    leaks_part = text.split("Likely leaks")[1]
    assert "…" in leaks_part and "test_hot_path[case-1]" in leaks_part  # the id's end kept
    # At 80 columns the leak wraps between its phrases, each whole.
    assert "lib.py:2 in hot  probability 98%  47.7 MB/s\n" in text
    assert "\n        47.7 MB kept, 47.6 MB more per run\n" in text
    assert "lib.py:9 in cached  28.6 MB held (did not grow when run again)" in text
    assert "16.0 MB   lib.py:2 in hot (40 tests)  KEPT.append(bytearray(100_000))" in text
    assert "  1 likely leak\n  1 held (not confirmed as leaks)\n" in text  # whole phrases
