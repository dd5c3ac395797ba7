"""Subtests (unittest's subTest, pytest's subtests fixture) under --profile: each subtest's report
comes while the test's call runs, so gates judge the test once, at its end. Judging every
subtest report made JUnit properties pile up (each report copies them: more-itertools' 9,592
subtests took 3.6 GB and 3x the time) and failed subtests on a half-run profile."""

from __future__ import annotations

import xml.etree.ElementTree as ET

SUITE = """
import unittest

import pytest


def crunch(n):
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


class Numbers(unittest.TestCase):
    def test_many(self):
        for i in range(2000):
            with self.subTest(i=i):
                self.assertGreaterEqual(i, 0)


@pytest.mark.perf_budget(cpu_s=0.001)
def test_over_budget(subtests):
    for i in range(3):
        with subtests.test(i=i):
            assert crunch(300_000) >= 0
"""


def test_subtests_are_not_judged_one_by_one(pytester):
    pytester.makepyfile(test_sub=SUITE)
    result = pytester.runpytest_subprocess(
        "-q", "-p", "no:cacheprovider", "--profile", "--profile-memory=no", "--junitxml=junit.xml"
    )
    # The 2003 subtests pass; only the test over its budget fails, once, at its end.
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*1 failed, 1 passed*, 2003 subtests passed in *"])
    result.stdout.no_fnmatch_line("*SUBFAIL*")
    cases = {c.get("name"): c for c in ET.parse(pytester.path / "junit.xml").iter("testcase")}
    for name in ("test_many", "test_over_budget"):
        names = [p.get("name") for p in cases[name].iter("property")]
        assert names.count("scalene_cpu_python_s") == 1, (name, len(names))
    gates = [p.get("value") for p in cases["test_over_budget"].iter("property")]
    assert any(v.startswith("failed: CPU time ") for v in gates)
