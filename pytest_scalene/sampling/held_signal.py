"""The CPU sampler's signal and timer, held from test to test (cpu_sampler.py).

The usual signal (SIGPROF for the CPU clock, SIGALRM for wall time) is taken at the first test
and kept until the session ends or the code under test claims it: taking and giving it back
around every test cost five system calls and 10 us a test. Where it is taken, a POSIX timer on a
free real-time signal stands in (timers.choose). Code that bypassed the signal guard may have
changed the handler or the timer meanwhile: each test checks, and the next looks for a free one.
"""

from __future__ import annotations

import _signal
import contextlib
import signal
import threading
from types import FrameType

from .timers import (
    IntervalTimer,
    SamplingTimer,
    choose,
    install_delivery_stamp,
    os_handler,
    python_trampoline,
    real_getsignal,
    real_signal,
)

_siginterrupt = signal.siginterrupt

CLOCKS = {"cpu": (signal.ITIMER_PROF, signal.SIGPROF), "wall": (signal.ITIMER_REAL, signal.SIGALRM)}


class SignalBusy(RuntimeError):
    """The timer signal or the interval timer is already in use by the code under test."""


class HeldSignal:
    """The sampler's signal and timer; the sampler's `_on_signal` is the handler installed."""

    def __init__(self, clock: str) -> None:
        self.clock = clock
        self.signum = CLOCKS[clock][1]
        self._usual_timer = IntervalTimer(*CLOCKS[clock])
        self._sampling_timer: SamplingTimer | None = None
        self.fallback_reason: str | None = None  # why the usual signal was not used
        self._previous_handler: object = None
        self._holds_signal = False
        self._kernel_handler: int | None = None  # the kernel's handler when it was taken

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        """The handler installed on the signal: the sampler's (CpuSampler._on_signal)."""
        raise NotImplementedError

    def _take_signal(self) -> None:
        try:
            timer, self.fallback_reason = choose(self.clock, self._usual_timer)
        except RuntimeError as exc:
            raise SignalBusy(str(exc)) from None
        self._sampling_timer = timer
        self.signum = timer.signum
        self._previous_handler = real_signal(self.signum, self._on_signal)
        # Python installs handlers without SA_RESTART: a tick would make a blocking C call
        # (read() on a pipe) fail with EINTR where it does not unprofiled.
        _siginterrupt(self.signum, False)
        self._holds_signal = True
        trampoline = python_trampoline(self.signum)  # read before the stamp goes in front
        self._kernel_handler = install_delivery_stamp(self.signum) or trampoline

    def _still_held(self) -> bool:
        """The usual signal is still the sampler's from the last test: its handler in Python's
        table and in the kernel's, and no one else's timer running on it. Code that bypassed
        the signal guard (a function bound before the session, a C library) may have changed
        any of the three; then the signal is theirs, and the next test looks for a free one."""
        if not self._holds_signal or self._sampling_timer is not self._usual_timer:
            return False
        if real_getsignal(self.signum) != self._on_signal:
            self._holds_signal = False  # their Python handler: nothing to give back
        elif os_handler(self.signum) != self._kernel_handler:
            # A C-level handler over ours: Python's table goes back to what was there before
            # (what getsignal shows unprofiled), the kernel keeps theirs.
            from .posix_timer import keeping_c_handler  # ctypes, on this rare path only

            with keeping_c_handler(self.signum):
                self._give_signal_back()
        elif self._usual_timer.running():
            self._give_signal_back()  # their timer, which unprofiled reaches what was before
        else:
            return True
        self._holds_signal = False
        self._sampling_timer = None
        return False

    def holds(self, signum: int) -> bool:
        """Whether `signum` is the sampler's, in a test or kept between tests."""
        return self._holds_signal and signum == self.signum

    @property
    def held_itimer(self) -> int | None:
        """The setitimer timer of the signal kept (None: a POSIX timer, or none kept)."""
        timer = self._sampling_timer
        return timer.itimer if timer is not None and self._holds_signal else None

    @property
    def previous_handler(self) -> object:
        """What held the signal before the sampler: what the test would see without it."""
        return self._previous_handler

    def _release(self) -> None:
        timer, self._sampling_timer = self._sampling_timer, None
        if timer is not None:
            timer.disarm()
            timer.close()
        self._give_signal_back()

    def _give_signal_back(self) -> None:
        # Only the main thread may set handlers: from another one, stop() does it later.
        if not self._holds_signal or threading.current_thread() is not threading.main_thread():
            return
        self._holds_signal = False
        if real_getsignal(self.signum) != self._on_signal:  # the code under test set one
            return
        # A tick still pending (the signal blocked in every thread) would otherwise reach the
        # default action, which for SIGPROF, SIGALRM and real-time signals ends the process.
        with contextlib.suppress(OSError, ValueError, AttributeError):
            if self.signum in _signal.sigpending():  # ints: signal's own makes enums
                signal.sigtimedwait([self.signum], 0)
        real_signal(self.signum, self._previous_handler)  # type: ignore[arg-type]
