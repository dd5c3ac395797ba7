"""Tests that are not idempotent: a second call of the same test fails or skips."""

import unittest

import pytest

CALLS: list[str] = []
TOKENS = iter([1])
CACHE: dict[str, int] = {}


def test_registers_once():
    CALLS.append("registered")
    assert CALLS.count("registered") == 1


def test_consumes_a_token():
    assert next(TOKENS) == 1


def test_skips_when_warm():
    if "warm" in CACHE:
        pytest.skip("cache already warm")
    CACHE["warm"] = 1


def test_independent():
    assert sum(range(10)) == 45


class TestCounter(unittest.TestCase):
    runs = 0

    def test_first_run_only(self):
        type(self).runs += 1
        self.assertEqual(type(self).runs, 1)

    def test_skips_when_repeated(self):
        if getattr(type(self), "seen", False):
            self.skipTest("already seen")
        type(self).seen = True
