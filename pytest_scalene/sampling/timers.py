"""The CPU sampler's timer: an interval timer (setitimer), or a POSIX timer on a free signal.

The sampler prefers ITIMER_PROF/SIGPROF (cpu clock) or ITIMER_REAL/SIGALRM (wall clock). When
that signal or timer is already in use (a conftest's handler, pytest-timeout's SIGALRM, a C
library's handler seen only by sigaction), it falls back to a POSIX timer (timer_create) on the
same clock (CLOCK_PROCESS_CPUTIME_ID or CLOCK_MONOTONIC, what setitimer uses) delivering a
free real-time signal (posix_timer.py), so the code under test keeps its signal and is still
profiled. POSIX timers, like interval timers, are not inherited by fork() children. An interval
timer's per-test calls go through the _timer_calls extension: one call at each end of a test.

The functions of the signal module are bound here at import: during a test, signal_guard
replaces the module's attributes, and the sampler must keep talking to the real ones. Its
handler functions are taken from _signal, the C module under `signal`: the wrappers turn
SIG_DFL and SIG_IGN into enum members (0.4 us a call, a dozen calls a test); what the code under
test is shown goes through python_handler.
"""

from __future__ import annotations

import _signal as _c_signal
import resource
import signal
import threading
from typing import Any, Protocol

try:
    from .. import _timer_calls  # the per-test calls in C (native/timer_calls.c)
except ImportError:  # an in-tree checkout without the build: ctypes, slower
    _timer_calls = None  # type: ignore[assignment]

real_signal = _c_signal.signal
real_getsignal = _c_signal.getsignal
real_setitimer = signal.setitimer
real_getitimer = signal.getitimer


def python_handler(handler: Any) -> Any:
    """A handler as signal.getsignal returns it: SIG_DFL and SIG_IGN as its enum members."""
    if isinstance(handler, int) and not isinstance(handler, signal.Handlers):
        return signal.Handlers(handler)
    return handler


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        if hasattr(signal, "SIGRTMIN") and signal.SIGRTMIN < signum <= signal.SIGRTMAX:
            return f"SIGRTMIN+{signum - signal.SIGRTMIN}"
        return f"signal {signum}"


def os_handler(signum: int) -> int | None:
    """The handler the kernel has for `signum` (0: default, 1: ignore), or None if unknown.
    A C-level handler (faulthandler.register, a preloaded library) is invisible to
    signal.getsignal, which keeps reporting SIG_DFL."""
    if _timer_calls is not None:
        return _timer_calls.kernel_handler(signum)
    from .posix_timer import kernel_handler

    return kernel_handler(signum)


def install_delivery_stamp(signum: int) -> int | None:
    """A C handler in front of Python's on `signum` that stamps each delivery with the main
    thread's CPU clock (native/timer_calls.c; signal_delay.py says why): the kernel's handler
    address now, or None where it cannot be (no extension; nothing changed). Call on the main
    thread, right after a Python handler was installed."""
    return None if _timer_calls is None else _timer_calls.stamp_install(signum)


def delivered_at() -> float | None:
    """The main thread's CPU seconds at the first delivery of the stamped signal since the last
    call, or None where none came or no stamp is installed."""
    return None if _timer_calls is None else _timer_calls.stamp_take()


_trampoline: int | None = None  # Python's C-level handler, the same for every signal


def python_trampoline(signum: int) -> int | None:
    """The C function through which Python runs its handlers, read off `signum` right after
    a Python handler was installed on it."""
    global _trampoline
    if _trampoline is None:
        _trampoline = os_handler(signum)
    return _trampoline


def signal_in_use(signum: int) -> str | None:
    """Why `signum` is not free for the sampler, or None when it is."""
    python = real_getsignal(signum)
    if python is None:
        return f"{signal_name(signum)} has a handler installed outside Python"
    if python not in (signal.SIG_DFL, signal.SIG_IGN):
        return f"{signal_name(signum)} has a handler ({getattr(python, '__qualname__', python)})"
    native = os_handler(signum)
    # Python's own C handler under SIG_DFL in its table runs nothing (a C library put it
    # back after keeping_c_handler): the signal is free.
    if native not in (None, 0, 1, _trampoline):
        return f"{signal_name(signum)} has a C-level handler (e.g. faulthandler.register)"
    return None


class SamplingTimer(Protocol):
    signum: int
    itimer: int | None  # the setitimer timer it uses, if any
    description: str

    def arm(self, interval_s: float) -> None: ...

    def disarm(self) -> None: ...

    def until_expiry(self) -> float: ...

    def close(self) -> None: ...


class IntervalTimer:
    def __init__(self, itimer: int, signum: int) -> None:
        self.itimer: int | None = itimer
        self.signum = signum
        self.description = signal_name(signum)
        self._interval = 0.0  # as the kernel rounded it
        self._requested = 0.0
        self._armed = False

    def arm(self, interval_s: float) -> None:
        real_setitimer(self.itimer, interval_s, interval_s)  # type: ignore[arg-type]
        if interval_s != self._requested:  # the same request rounds the same way
            self._requested = interval_s
            self._interval = real_getitimer(self.itimer)[1]  # type: ignore[arg-type]
        self._armed = True

    def running(self) -> bool:
        return real_getitimer(self.itimer) != (0.0, 0.0)  # type: ignore[arg-type]

    def disarm(self) -> None:
        if not self._armed:  # the sampler's stop and its release both disarm
            return
        self._armed = False
        # Code that bypassed signal_guard (`from signal import setitimer`) may have set its
        # own timer meanwhile: that one is left running.
        if real_getitimer(self.itimer)[1] in (0.0, self._interval):  # type: ignore[arg-type]
            real_setitimer(self.itimer, 0.0, 0.0)  # type: ignore[arg-type]

    def begin(
        self, interval_s: float, handler: int | None, main_ident: int | None
    ) -> tuple[float, float, float] | bool | None:
        """arm() where the kernel's handler for the signal is still `handler` and the timer is not
        running, then the clocks read after it, in one call: (user_s, system_s, until_expiry_s);
        True where threading knows the thread `main_ident` alone: the readings are then kept in
        C for end_test (most tests: one call at each end). None, nothing done, where either
        check fails (the caller looks into why), and where the extension is missing or
        `interval_s` was never armed (its rounding is not known)."""
        if _timer_calls is None or handler is None or interval_s != self._requested:
            return None
        reading = _timer_calls.begin(
            self.signum, handler, self.itimer, interval_s, threading._active, main_ident
        )
        self._armed = reading is not None
        return reading

    def end_test(self, profile: Any, main_ident: int | None) -> float | None:
        """After begin() returned True: end() and the CPU time since the start charged to
        `profile` (cpu_sampler._final_main_only), in one call; the seconds charged. None,
        nothing done, where other threads run now: the caller takes start_readings()."""
        used = _timer_calls.end_test(
            self.itimer, self._interval, profile, threading._active, main_ident
        )
        if used is not None:
            self._armed = False
        return used

    @staticmethod
    def start_readings() -> tuple[float, float, float, float] | None:
        """The (user_s, system_s, perf_counter_s, until_expiry_s) begin() kept, handed over;
        None where it kept none."""
        return _timer_calls.start_readings()

    def end(self) -> tuple[float, float]:
        """disarm(), then the process's (user_s, system_s), in one call where it can be."""
        if _timer_calls is None or not self._armed:
            self.disarm()
            usage = resource.getrusage(resource.RUSAGE_SELF)
            return usage.ru_utime, usage.ru_stime
        self._armed = False
        return _timer_calls.end(self.itimer, self._interval)

    def until_expiry(self) -> float:
        return real_getitimer(self.itimer)[0]  # type: ignore[arg-type]

    def close(self) -> None:
        pass

    def busy(self) -> str | None:
        taken = signal_in_use(self.signum)
        if taken is None and self.running():
            taken = f"its interval timer is running ({self.description})"
        return taken


def free_realtime_signal() -> int | None:
    if not hasattr(signal, "SIGRTMIN"):
        return None
    # From the top down: libraries that use real-time signals usually take them from SIGRTMIN up.
    for signum in range(signal.SIGRTMAX, signal.SIGRTMIN - 1, -1):
        if real_getsignal(signum) == signal.SIG_DFL and os_handler(signum) == 0:
            return signum
    return None


def choose(clock: str, usual: IntervalTimer) -> tuple[SamplingTimer, str | None]:
    """The timer to sample `clock` with: `usual` (setitimer, kept by the sampler from one test
    to the next), or where it is taken a POSIX timer, and why (None for the usual one). Raises
    RuntimeError naming the conflict when neither is possible."""
    taken = usual.busy()
    if taken is None:
        return usual, None
    from .posix_timer import CLOCK_MONOTONIC, CLOCK_PROCESS_CPUTIME_ID, PosixTimer, libc

    spare = free_realtime_signal() if libc is not None else None
    if spare is None:
        raise RuntimeError(f"{taken}, and no free real-time signal for a POSIX timer")
    clock_id = CLOCK_PROCESS_CPUTIME_ID if clock == "cpu" else CLOCK_MONOTONIC
    try:
        timer = PosixTimer(clock_id, spare, signal_name(spare))
    except OSError as exc:
        raise RuntimeError(f"{taken}, and a POSIX timer failed: {exc}") from None
    return timer, f"{taken}: sampled with {timer.description} instead"
