"""Tests that take runtime functions away must behave as unprofiled: attrs' suite deletes
sys._getframe (make_class must work without it), and the samplers' signal handlers and the end
of profiling ran inside that test, so it failed with an AttributeError from the plugin."""

from __future__ import annotations

import json

SUITE = """
import sys


def crunch(n):
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def test_without_frame_functions(monkeypatch):
    monkeypatch.delattr(sys, "_getframe")
    monkeypatch.delattr(sys, "_current_frames")
    data = [bytearray(1_000_000) for _ in range(40)]  # memory samples while they are gone
    assert crunch(1_000_000) >= 0 and len(data) == 40
"""


def test_deleted_frame_functions_do_not_fail_the_test(pytester):
    pytester.makepyfile(test_patched=SUITE)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--profile", "--profile-json=p.json"
    )
    result.assert_outcomes(passed=1)
    data = json.loads((pytester.path / "p.json").read_text())
    test = data["tests"]["test_patched.py::test_without_frame_functions"]
    assert "crunch" in {line["function"] for line in test["lines"]}
    assert not [n for n in data["notes"] if "failed" in n or "error" in n]


SUITE_TIME = """
import time


def test_a_without_perf_counter(monkeypatch):
    monkeypatch.delattr(time, "perf_counter")
    assert sum(i * i for i in range(300_000)) > 0


def test_b_memory_still_profiled():
    data = [bytearray(1_000_000) for _ in range(60)]
    assert len(data) == 60
"""


def test_deleted_perf_counter_leaves_later_tests_profiled(pytester):
    pytester.makepyfile(test_time=SUITE_TIME)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--profile", "--profile-json=p.json"
    )
    result.assert_outcomes(passed=2)
    data = json.loads((pytester.path / "p.json").read_text())
    assert not [n for n in data["notes"] if "failed" in n or "armed" in n], data["notes"]
    if "peak_mb" in data["tests"]["test_time.py::test_a_without_perf_counter"]:  # shim loaded
        assert data["tests"]["test_time.py::test_b_memory_still_profiled"]["peak_mb"] > 40
