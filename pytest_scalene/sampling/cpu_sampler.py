"""The CPU sampler: a timer signal every `interval_s` splits time into Python, native and system.

Per signal, each thread is charged the CPU time it used since the last signal (its own thread
CPU clock, so a blocked thread is never charged). The system part is the process's system share
of that interval (getrusage). The rest is split into Python and native:
- main thread: signal-delay inference (signal_delay.py). CPython runs the handler only between
  bytecodes, so the time from the timer's expiry to the handler was spent in native code.
- other threads: `dis` on their current instruction: on a CALL means native, otherwise Python.
- CPU time of threads Python does not know (BLAS and OpenMP pools) or that ended during the
  interval is the process's CPU time minus the threads' sum: native, charged to the main thread.
Where: each thread's innermost profiled line, or at a function's entry its caller's
(scope.where_it_ran).
The handler's own CPU time is excluded: the main thread's clock is read again when it returns.
The handler never nests: while it waits for the GIL, the next signal may already be pending.
"""

from __future__ import annotations

import contextlib
import resource
import threading
from collections.abc import Callable, Sequence

# Bound now: a test may delete time.perf_counter (and each look-up costs, per test).
from time import CLOCK_PROCESS_CPUTIME_ID, CLOCK_THREAD_CPUTIME_ID, perf_counter
from time import clock_gettime as _clock_gettime
from types import FrameType
from typing import Protocol

from ..core import extra_keys
from ..core.model import LineKey, TestProfile
from .call_sites import on_call
from .held_signal import HeldSignal, SignalBusy
from .scope import CodeScope, where_it_ran
from .signal_delay import SignalDelay
from .threads import current_frames, only_main_thread, thread_cpu
from .timers import delivered_at, real_getsignal


class SampleListener(Protocol):
    """Told of every CPU sample, e.g. to read GPU counters on the sampler's schedule."""

    def on_cpu_sample(
        self, profile: TestProfile, frame: FrameType | None, key: LineKey | None, cpu_s: float
    ) -> None:
        """`frame`: the main thread's frame; `key`: its profiled line (None outside profiled
        code); `cpu_s`: the CPU time charged to the main thread for this sample."""


class CpuSampler(HeldSignal):
    def __init__(
        self,
        scope: CodeScope,
        interval_s: float = 0.01,
        clock: str = "cpu",
        listeners: Sequence[SampleListener] = (),
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        super().__init__(clock)
        self.scope = scope
        self.interval_s = interval_s
        self.listeners = list(listeners)
        self.on_error = on_error
        self._profile: TestProfile | None = None
        self._main_ident = threading.main_thread().ident
        self._thread_clock: dict[int, float] = {}
        self._user = self._system = self._wall = 0.0
        self._delay = SignalDelay(interval_s, clock)  # the main thread's Python/native split
        # The test's start readings are kept in C (timers.IntervalTimer.begin) until a sample
        # lands or the test ends: most tests end first, charged by one call (_end_in_lane).
        self._in_lane = False
        self._in_handler = False

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self, profile: TestProfile) -> None:
        """Start sampling into `profile`. When the usual signal or timer is taken, a POSIX timer
        on a free real-time signal is used (sampling_timers); SignalBusy when neither works.
        The usual signal, once taken, is kept from test to test (five system calls and 10 us a
        test): only its timer is armed and disarmed, checked and armed in one call, which keeps
        the readings itself where the main thread runs alone (the lane)."""
        timer = self._sampling_timer
        if (
            timer is self._usual_timer
            and self._holds_signal
            and real_getsignal(self.signum) == self._on_signal
            and (reading := timer.begin(self.interval_s, self._kernel_handler, self._main_ident))
            is not None
        ):
            if reading is True:
                self._in_lane = True
            else:
                self._started(*reading)
            self._profile = profile  # last: a tick before it finds no test and is dropped
            return
        if not self._still_held():
            self._take_signal()
        timer = self._sampling_timer
        assert timer is not None
        self._profile = profile
        try:
            timer.arm(self.interval_s)
        except OSError as exc:
            self._profile = None
            self._release()
            raise SignalBusy(f"the sampler's timer failed: {exc}") from None
        usage = resource.getrusage(resource.RUSAGE_SELF)
        self._started(usage.ru_utime, usage.ru_stime, timer.until_expiry())

    def give_back(self) -> None:
        """Between tests: code is about to use the sampler's signal or timer (signal_guard), or
        the session ends. The signal goes back to what held it before."""
        if self._profile is None:
            self._release()

    def close(self) -> None:
        self.give_back()

    @property
    def active(self) -> bool:
        return self._profile is not None

    def step_aside(self, reason: str, frame: FrameType | None) -> None:
        """The code under test claims the sampler's signal or timer: stop sampling for the rest
        of the test and give the signal back as it was, before the test's own call goes on.
        `frame`: the caller's, charged with the last partial interval."""
        if self._profile is None:
            return
        if threading.current_thread() is threading.main_thread():
            with contextlib.suppress(Exception):  # giving the signal back matters more
                self.stop(frame)
        self._profile = None
        self._release()

    def abandon(self) -> None:
        """In a fork() child: never sample, give the signal back; the child's own timers were
        not inherited. Nothing is charged: the profile is a copy the child does not report.
        The timer is dropped untouched: it was not inherited either (setitimer and timer_create
        timers never are), and disarming by its settings could stop a child agent's new one."""
        self._profile = None
        self._in_lane = False
        self._sampling_timer = None
        self._give_signal_back()

    def stop(self, frame: FrameType | None = None) -> None:
        """Stop the timer; the partial last interval is charged to the test, and to the line of
        `frame` where one is given (step_aside: the test's own call). Without one, the test's
        code has returned: what runs now is pytest's, and looking for a profiled line above it
        cost 12 us a test to find none. The usual signal is kept for the next test; a POSIX
        timer's is given back."""
        if self._profile is None:
            self._release()  # after an error, step_aside from another thread, or abandon()
            return
        if self._in_lane:
            # A tick between these steps would sample from readings not yet Python's.
            self._in_handler = True
            try:
                if frame is None and self._end_in_lane():
                    return
                self._in_lane = False
                self._resume_readings()  # other threads run now, or step_aside: the general path
            finally:
                self._in_handler = False
        timer = self._sampling_timer
        main_only = frame is None and not self._thread_clock and only_main_thread(self._main_ident)
        ended: tuple[float, float] | None = None
        if timer is self._usual_timer and main_only:
            ended = self._usual_timer.end()  # disarmed, and the clocks read, in one call
        elif timer is not None:
            timer.disarm()
        self._in_handler = True  # a tick already pending must not sample a second time
        try:
            if main_only:
                self._final_main_only(ended)
            else:
                self._sample(frame, final=True)
        finally:
            self._in_handler = False
            self._profile = None
            self._thread_clock.clear()
            if timer is not self._usual_timer:
                self._release()

    def _end_in_lane(self) -> bool:
        """stop() for a test begun in the lane where threading still knows the main thread
        alone: the timer disarmed and the CPU time since the start charged (what
        _final_main_only does) in one call. False, nothing done, where other threads run."""
        profile = self._profile
        try:
            used = self._usual_timer.end_test(profile, self._main_ident)
        except BaseException:
            self._profile = None
            self._in_lane = False
            raise
        if used is None:
            return False
        self._in_lane = False
        self._profile = None
        for listener in self.listeners:
            listener.on_cpu_sample(profile, None, None, used)  # type: ignore[arg-type]
        return True

    def _resume_readings(self) -> None:
        """The start's readings, kept in C by the lane, become the general path's: a sample
        landed, or the test ends with other threads running. Only the main thread ran at the
        start: no thread has a baseline."""
        readings = self._usual_timer.start_readings()
        if readings is None:  # none kept (not expected): the test is charged from now on
            usage = resource.getrusage(resource.RUSAGE_SELF)
            readings = (usage.ru_utime, usage.ru_stime, perf_counter(), self._expiry())
        user, system, self._wall, until_expiry = readings
        self._user, self._system = user, system
        self._delay.restart(user + system if self.clock == "cpu" else self._wall, until_expiry)
        self._thread_clock = {}

    def _expiry(self) -> float:
        timer = self._sampling_timer
        return timer.until_expiry() if timer is not None else 0.0

    def _timer_now(self) -> float:
        # While a CPU timer is armed this clock is the kernel's counter, brought up to date at
        # ticks and by any CPU-time read: every caller reads getrusage or the thread clock first.
        return _clock_gettime(CLOCK_PROCESS_CPUTIME_ID) if self.clock == "cpu" else perf_counter()

    def _started(self, user: float, system: float, until_expiry: float) -> None:
        """The clocks at the test's start, read right after the timer was armed: `until_expiry`
        is the timer's first value, not the interval (Linux adds a tick, docs/cpu.md)."""
        self._user, self._system, self._wall = user, system, perf_counter()
        # The timer's clock: the process's CPU clock is getrusage's sum (to the microsecond).
        # Written out here and at the last interval's charge: a method call at each end of every
        # test cost 2% of the hot-path lifecycle figure (baselines/benchmarks/hot_paths).
        self._delay.restart(user + system if self.clock == "cpu" else self._wall, until_expiry)
        # The main thread alone (most tests) needs no baseline: it takes the CPU time no
        # thread's clock accounts for, and reading none saves 5 us a test.
        self._thread_clock = {}
        if not only_main_thread(self._main_ident):
            frames = current_frames()
            self._thread_clock = {i: cpu for i in frames if (cpu := thread_cpu(i)) is not None}

    def _exclude_handler_time(self, main_clock_at_entry: float) -> None:
        """Move the baselines past the main thread's time in the handler: that is the
        profiler's cost, not the test's. Other threads' clocks keep their entry readings."""
        spent = _clock_gettime(CLOCK_THREAD_CPUTIME_ID) - main_clock_at_entry
        self._user += spent
        self._wall = perf_counter()
        self._delay.timer_clock = self._timer_now()
        self._delay.until_expiry = self._expiry()
        self._thread_clock[self._main_ident] = main_clock_at_entry + spent

    # -- the handler -------------------------------------------------------------------------
    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self._profile is None or self._in_handler:
            return
        self._in_handler = True
        try:
            if self._in_lane:  # the test's first sample: the start's readings become Python's
                self._in_lane = False
                self._resume_readings()
            self._sample(frame)
        except Exception as exc:  # the profiler must never break the test
            self._profile = None
            self._release()
            if self.on_error is not None:
                self.on_error(exc)
        finally:
            self._in_handler = False

    def _ordered_frames(self) -> list[tuple[int, FrameType | None]]:
        # The main thread last, so that it can take the CPU time no other thread accounts for.
        # The main thread's entry is this very frame: kept, it would make a reference cycle
        # that keeps the test's frames (and their memory) alive until the next gc; _sample
        # uses the handler's frame for the main thread instead.
        if only_main_thread(self._main_ident):
            return [(self._main_ident, None)]
        frames = current_frames()
        has_main = frames.pop(self._main_ident, None) is not None
        ordered: list[tuple[int, FrameType | None]] = list(frames.items())
        if has_main:
            ordered.append((self._main_ident, None))
        return ordered

    def _final_main_only(self, ended: tuple[float, float] | None) -> None:
        """_sample(None, final=True) where the main thread is the only one and has no clock
        baseline (no sample landed in the test: most short tests): it takes the process's
        CPU time since the start, charged to no line (a third of the bytecodes). `ended`:
        the process's (user_s, system_s) read as the timer was disarmed, if it was."""
        profile = self._profile
        assert profile is not None
        if ended is None:
            usage = resource.getrusage(resource.RUSAGE_SELF)
            ended = usage.ru_utime, usage.ru_stime
        user_now, system_now = ended
        user = max(0.0, user_now - self._user)
        system = max(0.0, system_now - self._system)
        used = user + system
        if used > 0:
            now = user_now + system_now if self.clock == "cpu" else perf_counter()  # see _started
            python = user * self._delay.python_share(used, now, ended=True)
            profile.cpu_python_s += python
            profile.cpu_native_s += user - python
            profile.cpu_system_s += system
        for listener in self.listeners:
            listener.on_cpu_sample(profile, None, None, used)
        self._user, self._system = user_now, system_now

    def _sample(self, main_frame: FrameType | None, final: bool = False) -> None:
        """Charge the time since the last sample; `final`: at stop(), with no interval after
        it to keep the handler's own time out of."""
        profile = self._profile
        assert profile is not None
        main_clock_at_entry = 0.0 if final else _clock_gettime(CLOCK_THREAD_CPUTIME_ID)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        elapsed_wall = perf_counter() - self._wall
        # The handler's own time was taken off as user time (_exclude_handler_time): where it
        # was system time (a handler that faulted pages in), what is left may read below zero.
        user = max(0.0, usage.ru_utime - self._user)
        system = max(0.0, usage.ru_stime - self._system)
        system_share = system / (user + system) if user + system > 0 else 0.0

        main_key: tuple[LineKey, int] | None = None
        main_cpu = 0.0
        clocks = self._thread_clock
        readings: dict[int, float] = {}
        unseen = user + system  # process CPU not yet charged to a known thread
        for ident, frame in self._ordered_frames():
            if final and ident not in clocks:
                used = 0.0  # no baseline: its time is in `unseen`; no reading is kept at stop
            else:
                now = thread_cpu(ident)
                if now is None:
                    continue
                readings[ident] = now
                used = now - clocks.get(ident, now)
            unseen -= used
            is_main = ident == self._main_ident
            if is_main:
                frame = main_frame
                used += max(0.0, unseen)  # the main thread sorts last: see _ordered_frames
            located = where_it_ran(self.scope, frame) if frame is not None else None
            if is_main:
                main_key, main_cpu = located, max(0.0, used)
            if used <= 0 and not (is_main and self.clock == "wall"):
                continue
            cpu_system = used * system_share
            cpu_user = used - cpu_system
            if is_main:
                held = None if final else _held_since_delivery(main_clock_at_entry)
                python = cpu_user * self._delay.python_share(
                    used, self._timer_now(), held, ended=final
                )
                native = cpu_user - python
            else:
                native = cpu_user if frame is not None and on_call(frame) else 0.0
                python = cpu_user - native
            profile.cpu_python_s += python
            profile.cpu_native_s += native
            profile.cpu_system_s += cpu_system
            if located is not None:
                stats = profile.line(*located)
                stats.cpu_python_s += python
                stats.cpu_native_s += native
                stats.cpu_system_s += cpu_system
                stats.samples += 1
                if is_main and self.clock == "wall":
                    waited = max(0.0, elapsed_wall - used)
                    stats.extra[extra_keys.WAIT_S] = (
                        stats.extra.get(extra_keys.WAIT_S, 0.0) + waited
                    )
        for listener in self.listeners:
            listener.on_cpu_sample(profile, main_frame, main_key[0] if main_key else None, main_cpu)
        self._user, self._system = usage.ru_utime, usage.ru_stime
        self._thread_clock = readings
        if not final:
            self._exclude_handler_time(main_clock_at_entry)


def _held_since_delivery(main_clock_at_entry: float) -> float | None:
    """The main thread's CPU seconds from the signal's delivery to this handler (native code
    holding it back), or None where no delivery was stamped."""
    delivered = delivered_at()
    return None if delivered is None else max(0.0, main_clock_at_entry - delivered)
