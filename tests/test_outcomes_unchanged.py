"""The profiler never changes a test's result: failures, errors, skips and xfails read exactly as
without the plugin (the same traceback text), and what a test computes is the same."""

from __future__ import annotations

import re

import pytest

SUITE = """
import math
import threading

import pytest


def helper(x):
    return {"a": 1}[x]


@pytest.fixture
def broken():
    raise RuntimeError("fixture setup failed")


def test_assertion():
    values = [i * i for i in range(200_000)]
    assert sum(values) == 1, "sum differs"


def test_exception_in_helper():
    helper("b")


def test_setup_error(broken):
    pass


def test_skipped():
    pytest.skip("not here")


@pytest.mark.xfail(reason="known")
def test_xfail():
    assert False


def test_computes(capsys):
    total = 0.0
    for i in range(300_000):
        total += math.sin(i) * math.sqrt(i)
    box = []
    worker = threading.Thread(target=lambda: box.append(sum(range(1_000_000))))
    worker.start()
    worker.join()
    print("RESULT", repr(total), box[0])
"""


def _failures_section(text: str) -> list[str]:
    """The lines of the ERRORS and FAILURES sections (other sections, such as the profile
    report, differ by design)."""
    kept, keep = [], False
    for line in text.splitlines():
        header = re.fullmatch(r"=+ (.*?) =+", line)
        if header:
            keep = header.group(1) in ("ERRORS", "FAILURES")
        if keep:
            kept.append(line)
    return kept


@pytest.mark.slow
@pytest.mark.parametrize("memory", ["--profile-memory=no", "--profile-memory=yes"])
def test_failures_read_exactly_as_without_the_plugin(pytester, memory):
    pytester.makepyfile(test_suite=SUITE)
    common = ("-p", "no:cacheprovider", "-rA", "-s")
    plain = pytester.runpytest_subprocess(*common)
    profiled = pytester.runpytest_subprocess(*common, "--profile", memory)
    expected = {"passed": 1, "failed": 2, "errors": 1, "skipped": 1, "xfailed": 1}
    plain.assert_outcomes(**expected)
    profiled.assert_outcomes(**expected)
    assert plain.ret == profiled.ret == pytest.ExitCode.TESTS_FAILED
    failures = _failures_section(plain.stdout.str())
    assert any("KeyError: 'b'" in ln for ln in failures)
    assert _failures_section(profiled.stdout.str()) == failures
    results = [re.findall(r"RESULT \S+ \d+", r.stdout.str()) for r in (plain, profiled)]
    assert len(results[0]) == 1 and results[0] == results[1]
