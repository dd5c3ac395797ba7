"""The CPU sampler's per-test system calls in C (native/timer_calls.c), and the sampler's use of
them: checked and armed in one call at a test's start, disarmed and read in one at its end.

The raw calls are tried on ITIMER_VIRTUAL / SIGVTALRM, which nothing else in the test process
uses; the sampler on its own SIGPROF, outside any profiling session.
"""

from __future__ import annotations

import resource
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_scalene.core.model import TestProfile
from pytest_scalene.sampling import timers
from pytest_scalene.sampling.cpu_sampler import CpuSampler
from pytest_scalene.sampling.scope import CodeScope

calls = pytest.importorskip("pytest_scalene._timer_calls", reason="the extension is not built")

ITIMER, SIGNUM = signal.ITIMER_VIRTUAL, signal.SIGVTALRM


@pytest.fixture
def python_handler() -> Iterator[int]:
    """A Python handler on SIGVTALRM; the kernel's handler address under it."""
    previous = signal.signal(SIGNUM, lambda *_: None)
    try:
        handler = calls.kernel_handler(SIGNUM)
        assert handler not in (None, 0, 1)
        yield handler
    finally:
        signal.setitimer(ITIMER, 0.0, 0.0)
        signal.signal(SIGNUM, previous)


def test_begin_arms_as_setitimer_does_and_reads_the_clocks_after(python_handler: int) -> None:
    signal.setitimer(ITIMER, 0.01, 0.01)
    python_armed = signal.getitimer(ITIMER)[1]
    signal.setitimer(ITIMER, 0.0, 0.0)
    before = resource.getrusage(resource.RUSAGE_SELF)
    user, system, until_expiry = calls.begin(SIGNUM, python_handler, ITIMER, 0.01)
    after = resource.getrusage(resource.RUSAGE_SELF)
    assert signal.getitimer(ITIMER)[1] == python_armed  # the same rounding as Python's
    assert before.ru_utime <= user <= after.ru_utime
    assert before.ru_stime <= system <= after.ru_stime
    assert 0.0 < until_expiry <= python_armed + 0.011  # Linux may add a tick to the first value


def test_begin_leaves_a_signal_whose_kernel_handler_changed(python_handler: int) -> None:
    assert calls.begin(SIGNUM, python_handler + 1, ITIMER, 0.01) is None
    assert signal.getitimer(ITIMER) == (0.0, 0.0)  # nothing armed


def test_begin_leaves_a_running_timer_as_it_was(python_handler: int) -> None:
    signal.setitimer(ITIMER, 5.0, 3.0)
    assert calls.begin(SIGNUM, python_handler, ITIMER, 0.01) is None
    assert signal.getitimer(ITIMER)[1] == 3.0  # theirs, untouched


def test_end_disarms_only_the_samplers_timer(python_handler: int) -> None:
    calls.begin(SIGNUM, python_handler, ITIMER, 0.01)
    ours = signal.getitimer(ITIMER)[1]
    user, system = calls.end(ITIMER, ours)
    assert signal.getitimer(ITIMER) == (0.0, 0.0)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    assert user <= usage.ru_utime and system <= usage.ru_stime
    signal.setitimer(ITIMER, 5.0, 3.0)  # code that bypassed the signal guard set its own
    calls.end(ITIMER, ours)
    assert signal.getitimer(ITIMER)[1] == 3.0


def test_the_wrong_number_of_arguments_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="takes 4 arguments"):
        calls.begin(SIGNUM, 0, ITIMER)


class Counting:
    """The extension with its calls counted."""

    def __init__(self) -> None:
        self.begun = self.ended = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(calls, name)

    def begin(self, *args: Any) -> Any:
        self.begun += 1
        return calls.begin(*args)

    def end(self, *args: Any) -> Any:
        self.ended += 1
        return calls.end(*args)


def busy(seconds: float) -> None:
    start = resource.getrusage(resource.RUSAGE_SELF).ru_utime
    while resource.getrusage(resource.RUSAGE_SELF).ru_utime - start < seconds:
        sum(i * i for i in range(1000))


def test_the_sampler_takes_one_call_at_each_end_of_a_test(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A sampler left holding SIGPROF (one stopped but never closed) makes this one fall back
    # to a POSIX timer, which has no one-call path.
    assert timers.signal_in_use(signal.SIGPROF) is None, "another test left SIGPROF taken"
    counting = Counting()
    monkeypatch.setattr(timers, "_timer_calls", counting)
    # No sample lands: the test's CPU time is what the two ends read.
    sampler = CpuSampler(CodeScope("/nonexistent"), interval_s=5.0)
    profiles = [TestProfile(f"t{i}") for i in range(3)]
    try:
        for profile in profiles:
            before = resource.getrusage(resource.RUSAGE_SELF)
            sampler.start(profile)
            busy(0.05)
            sampler.stop()
            after = resource.getrusage(resource.RUSAGE_SELF)
            measured = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            charged = profile.cpu_python_s + profile.cpu_native_s + profile.cpu_system_s
            assert 0.9 * measured <= charged <= measured
            assert profile.cpu_python_s >= 0.9 * charged - profile.cpu_system_s  # a Python loop
            assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)  # disarmed after each
    finally:
        sampler.close()
    # The first test takes the signal and arms in Python (the timer's rounding is not known
    # before); every later one is one call at each end.
    assert (counting.begun, counting.ended) == (2, 3)
