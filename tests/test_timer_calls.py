"""The CPU sampler's per-test system calls in C (native/timer_calls.c), and the sampler's use of
them: checked and armed in one call at a test's start, disarmed and read in one at its end.

The raw calls are tried on ITIMER_VIRTUAL / SIGVTALRM, which nothing else in the test process
uses; the sampler on its own SIGPROF, outside any profiling session.
"""

from __future__ import annotations

import resource
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_scalene.core.model import TestProfile
from pytest_scalene.sampling import timers
from pytest_scalene.sampling.cpu_sampler import CpuSampler
from pytest_scalene.sampling.scope import CodeScope
from pytest_scalene.sampling.signal_delay import SignalDelay

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

    def end_test(self, *args: Any) -> Any:
        self.ended += 1
        return calls.end_test(*args)


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


# -- the lane: the start's readings kept in C, the end charged in one call --------------------
MAIN = threading.main_thread().ident


@pytest.fixture
def other_thread() -> Iterator[threading.Thread]:
    """A thread threading knows, alive until the test ends."""
    done = threading.Event()
    thread = threading.Thread(target=done.wait)
    thread.start()
    try:
        yield thread
    finally:
        done.set()
        thread.join()


def test_begin_keeps_the_readings_where_the_main_thread_runs_alone(python_handler: int) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF)
    wall_before = time.perf_counter()
    assert calls.begin(SIGNUM, python_handler, ITIMER, 0.01, threading._active, MAIN) is True
    wall_after = time.perf_counter()
    after = resource.getrusage(resource.RUSAGE_SELF)
    user, system, wall, until_expiry = calls.start_readings()
    assert before.ru_utime <= user <= after.ru_utime
    assert before.ru_stime <= system <= after.ru_stime
    assert wall_before <= wall <= wall_after  # perf_counter's clock
    assert 0.0 < until_expiry <= signal.getitimer(ITIMER)[1] + 0.011
    assert calls.start_readings() is None  # handed over once


def test_begin_returns_the_readings_where_other_threads_run(
    python_handler: int, other_thread: threading.Thread
) -> None:
    reading = calls.begin(SIGNUM, python_handler, ITIMER, 0.01, threading._active, MAIN)
    assert isinstance(reading, tuple) and len(reading) == 3
    assert calls.start_readings() is None


def test_begin_takes_an_ident_it_cannot_look_up_as_another_thread(python_handler: int) -> None:
    reading = calls.begin(SIGNUM, python_handler, ITIMER, 0.01, {MAIN: None}, [])
    assert isinstance(reading, tuple)  # the readings, and no error left set


def _end_test(profile: TestProfile) -> Any:
    interval = signal.getitimer(ITIMER)[1]
    return calls.end_test(ITIMER, interval, profile, threading._active, MAIN)


def test_end_test_charges_a_test_no_sample_landed_in_as_python(python_handler: int) -> None:
    profile = TestProfile("t")
    profile.cpu_python_s = 1.0  # added to, not replaced (a test that runs again)
    before = resource.getrusage(resource.RUSAGE_SELF)
    assert calls.begin(SIGNUM, python_handler, ITIMER, 5.0, threading._active, MAIN) is True
    busy(0.05)
    used = _end_test(profile)
    after = resource.getrusage(resource.RUSAGE_SELF)
    measured = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert signal.getitimer(ITIMER) == (0.0, 0.0)
    assert 0.9 * measured <= used <= measured
    charged = profile.cpu_python_s - 1.0 + profile.cpu_native_s + profile.cpu_system_s
    assert charged == pytest.approx(used)
    assert profile.cpu_native_s == 0.0  # before the timer's expiry: bytecode ran throughout


def test_end_test_charges_a_test_past_its_expiry_with_no_handler_as_python(
    python_handler: int,
) -> None:
    # The signal blocked: the timer expires, no handler runs (as when the kernel has not noticed
    # the expiry yet, on a CPU shared with busy processes). No native code held a handler back:
    # one delivered would have run at a bytecode before the test's end. SignalDelay agrees.
    profile = TestProfile("t")
    signal.pthread_sigmask(signal.SIG_BLOCK, {SIGNUM})
    try:
        assert calls.begin(SIGNUM, python_handler, ITIMER, 0.01, threading._active, MAIN)
        busy(0.08)
        used = _end_test(profile)
    finally:
        if SIGNUM in signal.sigpending():
            signal.sigtimedwait([SIGNUM], 0)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {SIGNUM})
    assert used > 0.05 and profile.cpu_native_s == 0.0
    assert profile.cpu_python_s + profile.cpu_system_s == pytest.approx(used)
    delay = SignalDelay(0.01, "cpu")
    delay.restart(0.0, 0.01)
    assert delay.python_share(used, used, ended=True) == 1.0


def test_end_test_leaves_a_test_where_another_thread_runs_now(python_handler: int) -> None:
    assert calls.begin(SIGNUM, python_handler, ITIMER, 5.0, threading._active, MAIN) is True
    done = threading.Event()
    thread = threading.Thread(target=done.wait)
    thread.start()
    try:
        assert _end_test(TestProfile("t")) is None
        assert signal.getitimer(ITIMER) != (0.0, 0.0)  # still armed: the caller ends it
        assert len(calls.start_readings()) == 4
    finally:
        done.set()
        thread.join()


def _profiled(sampler: CpuSampler, profile: TestProfile, work: Any) -> float:
    """`work` profiled as `profile`, after as much CPU time unprofiled (pytest's, between
    tests: a start read before it would charge it); the CPU time the test took."""
    busy(0.05)
    before = resource.getrusage(resource.RUSAGE_SELF)
    sampler.start(profile)
    work()
    sampler.stop()
    after = resource.getrusage(resource.RUSAGE_SELF)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def test_a_sample_in_the_lane_hands_the_start_to_python() -> None:
    assert timers.signal_in_use(signal.SIGPROF) is None, "another test left SIGPROF taken"
    sampler = CpuSampler(CodeScope("/nonexistent"), interval_s=0.01)
    landed = []
    original = sampler._sample
    sampler._sample = lambda *a, **k: (landed.append(1), original(*a, **k))[1]  # type: ignore[method-assign]
    try:
        for profile in [TestProfile(f"t{i}") for i in range(3)]:
            measured = _profiled(sampler, profile, lambda: busy(0.15))
            assert 0.9 * measured <= profile.cpu_s <= measured
    finally:
        sampler.close()
    assert len(landed) > 10  # samples landed in the lane's tests (the last two)


def _ends_with_a_thread(sampler: CpuSampler) -> tuple[TestProfile, float]:
    """A first test, then a second that starts a thread in the lane, alive at its end: that end
    takes the general path. The second's profile and measured CPU time."""
    done = threading.Event()
    thread = threading.Thread(target=done.wait)

    def work_with_a_thread() -> None:
        assert sampler._in_lane  # the main thread alone at the start
        thread.start()
        # 0.2 s: the 10% the check allows must hold the general path's first stop (3.13 under
        # load: 53.9 ms charged of 60.7 ms measured around 50 ms of work)
        busy(0.2)

    try:
        _profiled(sampler, TestProfile("first"), lambda: busy(0.05))
        profile = TestProfile("second")
        return profile, _profiled(sampler, profile, work_with_a_thread)
    finally:
        done.set()
        thread.join()


def test_a_thread_started_in_the_lane_takes_the_general_path_at_the_end() -> None:
    assert timers.signal_in_use(signal.SIGPROF) is None, "another test left SIGPROF taken"
    sampler = CpuSampler(CodeScope("/nonexistent"), interval_s=5.0)
    try:
        profile, measured = _ends_with_a_thread(sampler)
        assert 0.9 * measured <= profile.cpu_s <= measured
    finally:
        sampler.close()


def test_a_tick_while_the_lane_hands_over_charges_nothing_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Python runs a handler between any two bytecodes: one run while stop() takes the start's
    # readings back from C would sample from the last test's readings, charging the time
    # between the tests as this one's.
    assert timers.signal_in_use(signal.SIGPROF) is None, "another test left SIGPROF taken"
    sampler = CpuSampler(CodeScope("/nonexistent"), interval_s=5.0)
    handing_over = sampler._usual_timer.start_readings

    def with_a_tick() -> Any:
        sampler._on_signal(signal.SIGPROF, None)
        return handing_over()

    monkeypatch.setattr(sampler._usual_timer, "start_readings", with_a_tick)
    try:
        profile, measured = _ends_with_a_thread(sampler)
        assert 0.9 * measured <= profile.cpu_s <= measured
    finally:
        sampler.close()


def test_the_lane_on_the_wall_clock_charges_cpu_time_not_the_wait() -> None:
    # --profile-clock=wall: the timer runs on wall time (ITIMER_REAL), the lane reads
    # perf_counter's clock; a test that waits is charged the CPU time it used.
    assert timers.signal_in_use(signal.SIGALRM) is None, "another test left SIGALRM taken"
    sampler = CpuSampler(CodeScope("/nonexistent"), interval_s=5.0, clock="wall")

    def wait_and_work() -> None:
        assert sampler._in_lane
        time.sleep(0.1)
        busy(0.05)

    try:
        _profiled(sampler, TestProfile("first"), lambda: busy(0.05))
        profile = TestProfile("second")
        measured = _profiled(sampler, profile, wait_and_work)
        assert 0.9 * measured <= profile.cpu_s <= measured
        assert profile.cpu_native_s == 0.0  # before the expiry: bytecode ran throughout
    finally:
        sampler.close()


# -- delivery stamps ----------------------------------------------------------------------------
def _held_by(work: Any) -> tuple[list[float | None], list[float]]:
    """`work` run with SIGVTALRM due 20 ms of CPU into it (a thread could not send it: it would
    wait for the GIL that a C call holds), under a stamped Python handler: the main thread's CPU
    seconds from the delivery to the handler, per handler run, and the kernel's handler
    addresses (Python's, then the stamp's)."""
    held: list[float | None] = []

    def on_signal(*_: Any) -> None:
        now = time.clock_gettime(time.CLOCK_THREAD_CPUTIME_ID)
        delivered = calls.stamp_take()
        held.append(None if delivered is None else now - delivered)

    previous = signal.signal(SIGNUM, on_signal)
    try:
        python = calls.kernel_handler(SIGNUM)
        stamped = calls.stamp_install(SIGNUM)
        addresses = [python, stamped, calls.kernel_handler(SIGNUM)]
        signal.setitimer(ITIMER, 0.02)  # once
        work()
        time.sleep(0.001)  # a bytecode or two for the handler, had it not run yet
    finally:
        signal.setitimer(ITIMER, 0.0)
        signal.signal(SIGNUM, previous)
    assert calls.kernel_handler(SIGNUM) != stamped  # Python's signal.signal replaced it
    return held, addresses


def test_the_stamp_chains_to_python_and_measures_native_holding_the_handler() -> None:
    data = [(i * 7919) % 100_003 for i in range(2_000_000)]
    held, (python, stamped, installed) = _held_by(lambda: sorted(data))  # one C call, ~0.4 s
    assert stamped == installed and stamped not in (None, python)
    assert len(held) == 1 and held[0] is not None, held  # Python's handler ran, once
    assert held[0] > 0.05, held  # the sort's CPU time after the delivery

    def python_loop() -> None:
        start = time.process_time()
        while time.process_time() - start < 0.1:
            pass

    held, _ = _held_by(python_loop)
    assert len(held) == 1 and held[0] is not None and held[0] < 0.001, held
    assert calls.stamp_take() is None  # taken by the handler


def test_begin_drops_a_stamp_from_between_tests(python_handler: int) -> None:
    stamped = calls.stamp_install(SIGNUM)
    signal.pthread_kill(threading.get_ident(), SIGNUM)  # delivered now, handled at a bytecode
    assert calls.begin(SIGNUM, stamped, ITIMER, 5.0, threading._active, threading.get_ident())
    assert calls.stamp_take() is None
    assert calls.end_test(ITIMER, signal.getitimer(ITIMER)[1], TestProfile("t"), {}, 0) is None
    calls.start_readings()
