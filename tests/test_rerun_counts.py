"""A confirmation re-run (or a --profile-repeat run) leaves pytest's counts as a plain run's: what
the re-run reports of itself (each subtest's report, the warnings it raises) reaches no plugin.
On a third-party suite 1,245 subtests read 1,252 and 1,281 under confirmations
(gates/repeat.py, quiet_rerun)."""

from __future__ import annotations

import json

SUITE = """
import unittest
import warnings

import pytest


def work(name):
    # Heavy on a test's first call only: against a baseline of 0 s it reads as a CPU
    # regression, which the first confirmation re-run (light) clears. Heavy enough to be one
    # on a fast machine: a growth from 0 must pass 3 standard errors of its samples (0.09 s
    # at 10 ms); 2 M iterations took 0.08 s in a fast phase and passed unconfirmed.
    with open("calls.txt", "a") as calls:
        calls.write(name + "\\n")
    with open("calls.txt") as calls:
        call = calls.read().split().count(name)
    total = 0
    for i in range(6_000_000 if call == 1 else 1000):
        total += i * i % 7
    # A text of its own per call: a re-run's warning is not one the first run already showed.
    warnings.warn(f"old api, call {call}", DeprecationWarning)


class Numbers(unittest.TestCase):
    def test_unittest_subtests(self):
        work("unittest")
        for i in range(5):
            with self.subTest(i=i):
                self.assertGreaterEqual(i, 0)


def test_fixture_subtests(subtests):
    work("fixture")
    for i in range(4):
        with subtests.test(i=i):
            assert i >= 0
"""

COUNTS = "*2 passed, 2 warnings, 9 subtests passed in *"


def test_a_confirmation_rerun_leaves_the_subtest_and_warning_counts_unchanged(pytester):
    pytester.makepyfile(test_sub=SUITE)
    flags = ("-v", "-p", "no:cacheprovider", "-W", "default::DeprecationWarning")
    plain = pytester.runpytest_subprocess(*flags)
    plain.stdout.fnmatch_lines([COUNTS])

    saved = pytester.runpytest_subprocess(*flags, "--profile", "--profile-save-baseline")
    saved.assert_outcomes(passed=2)
    path = pytester.path / "baselines" / "test_sub.py.json"
    baseline = json.loads(path.read_text())
    for entry in baseline["tests"].values():
        entry["metrics"]["cpu_s"] = 0.0  # every compared run now reads as a CPU regression
    path.write_text(json.dumps(baseline))
    (pytester.path / "calls.txt").unlink()

    compared = pytester.runpytest_subprocess(*flags, "--profile", "--profile-compare")
    compared.stdout.fnmatch_lines([COUNTS])
    compared.stdout.fnmatch_lines(["*cleared by warm re-runs*"])
    calls = (pytester.path / "calls.txt").read_text().split()
    assert sorted(set(calls)) == ["fixture", "unittest"] and len(calls) >= 4  # re-run, confirmed


FLAKY_SUBTEST = """
CALLS = []


def test_second_call_fails_a_subtest(subtests):
    CALLS.append(1)
    for i in range(3):
        with subtests.test(i=i):
            assert len(CALLS) == 1 or i < 2
"""


def test_a_subtest_failing_in_a_repeat_ends_the_repeats_and_the_test_passes(pytester):
    pytester.makepyfile(test_flaky=FLAKY_SUBTEST)
    result = pytester.runpytest_subprocess(
        "-v", "-p", "no:cacheprovider", "--profile", "--profile-repeat=3", "--profile-json=p.json"
    )
    result.stdout.fnmatch_lines(["*1 passed, 3 subtests passed in *"])
    [test] = json.loads((pytester.path / "p.json").read_text())["tests"].values()
    assert test["not_repeatable"].startswith("not repeatable: run 2 failed (SubtestFailed")
