"""Keeps a test's own use of signals and timers working while the CPU sampler runs.

From the first profiled test to the end of the session, signal.signal, signal.getsignal,
signal.setitimer, signal.getitimer, signal.alarm and faulthandler.register are wrapped (the
sampler keeps its signal from test to test; wrapping them per test cost 8 us a test):
- a test that claims the sampler's signal (a handler, faulthandler.register, asyncio's
  add_signal_handler) or its interval timer makes the sampler step aside for the rest of that
  test: the timer stops and the signal goes back to what held it before, before the test's own
  call runs. The test sees what it would see unprofiled, and the report says which signal was
  given up (CPU figures for that test are partial, so its CPU budgets do not pass on them).
- getsignal/getitimer of the sampler's signal/timer answer what was there before the sampler,
  and cancelling a timer that is not running (setitimer(..., 0), alarm(0)) leaves ours alone.
- between tests (fixtures, other plugins, tests not profiled), the same claims make the sampler
  give the signal back first, and getsignal answers what was there before: the code sees what
  it would see unprofiled, and the next test takes the signal again, or a free one.
A fork() child gives the signal back and never samples (core/after_fork.py): its copy of the
profile is not reported, and an inherited handler would change what its own signals do.
Code that bound these functions before the test (`from signal import setitimer`) bypasses
the wrappers; the sampler then leaves a timer it did not set running (sampling_timers).
"""

from __future__ import annotations

import faulthandler
import signal
import sys
import threading
from collections.abc import Callable

# Bound at import: a test may delete it (attrs' suite does).
from sys import _getframe
from types import FrameType
from typing import Any

from ..core.after_fork import run_in_fork_child
from .cpu_sampler import CpuSampler
from .patches import Patches
from .timers import python_handler, real_getitimer, real_setitimer, signal_name

# The Python functions, with their enum conversions, for the code under test; the samplers
# use the C ones (timers.py).
_signal = signal.signal
_getsignal = signal.getsignal
_alarm = signal.alarm
_faulthandler_register = faulthandler.register
_ITIMER_NAMES = {signal.ITIMER_REAL: "ITIMER_REAL", signal.ITIMER_PROF: "ITIMER_PROF"}


class SignalGuard:
    """Wraps the signal functions around one profiled test; see the module doc."""

    def __init__(
        self,
        sampler: CpuSampler,
        on_step_aside: Callable[[str], None],
        in_child: Callable[[], None] = lambda: None,
    ) -> None:
        self.sampler = sampler
        self.on_step_aside = on_step_aside
        self.in_child = in_child  # more to undo in a fork() child (the blocking patches)
        self._patches = Patches()

    def _claim(self, what: str, frame: FrameType | None) -> None:
        """The code is about to use the sampler's signal or timer: in a test, the sampler steps
        aside for the rest of it; between tests, the signal kept for the next one goes back."""
        if not self.sampler.active:
            self.sampler.give_back()
            return
        signum = self.sampler.signum
        reason = f"the test took {what}; CPU sampling gave up {signal_name(signum)} for the rest"
        self.sampler.step_aside(reason, frame)
        self.on_step_aside(reason)

    def _ours(self, signalnum: int) -> bool:
        return self.sampler.holds(signalnum)

    def _our_timer(self, which: int) -> bool:
        return which == self.sampler.held_itimer

    # -- the wrappers ------------------------------------------------------------------------
    def _signal(self, signalnum: int, handler: Any) -> Any:
        if self._ours(signalnum) and threading.current_thread() is threading.main_thread():
            self._claim(f"{signal_name(signalnum)} (signal.signal)", _getframe(1))
        return _signal(signalnum, handler)

    def _getsignal(self, signalnum: int) -> Any:
        if self._ours(signalnum):
            return python_handler(self.sampler.previous_handler)
        return _getsignal(signalnum)

    def _setitimer(self, which: int, seconds: float, interval: float = 0.0) -> tuple[float, float]:
        if self._our_timer(which):
            if seconds == 0:  # cancels a timer that, unprofiled, would not be running
                return (0.0, 0.0) if self.sampler.active else real_setitimer(which, 0.0, 0.0)
            name = _ITIMER_NAMES.get(which, str(which))
            self._claim(f"{name} (signal.setitimer)", _getframe(1))
        return real_setitimer(which, seconds, interval)

    def _getitimer(self, which: int) -> tuple[float, float]:
        if self.sampler.active and self._our_timer(which):
            return (0.0, 0.0)
        return real_getitimer(which)

    def _alarm(self, seconds: int) -> int:
        if self._our_timer(signal.ITIMER_REAL):
            if seconds == 0:
                return 0 if self.sampler.active else _alarm(0)
            self._claim("ITIMER_REAL (signal.alarm)", _getframe(1))
        return _alarm(seconds)

    def _faulthandler_register(self, signum: int, *args: Any, **kwargs: Any) -> None:
        if self._ours(signum):
            self._claim(f"{signal_name(signum)} (faulthandler.register)", _getframe(1))
        return _faulthandler_register(signum, *args, **kwargs)

    # -- for the session ---------------------------------------------------------------------
    def apply(self) -> None:
        """Wraps the functions (once; again after undo())."""
        global _current
        if _current is self:
            return  # in since an earlier test (each test applies it; most find it in)
        applied = self._patches.apply(
            (
                (signal, "signal", self._signal),
                (signal, "getsignal", self._getsignal),
                (signal, "setitimer", self._setitimer),
                (signal, "getitimer", self._getitimer),
                (signal, "alarm", self._alarm),
                (faulthandler, "register", self._faulthandler_register),
            )
        )
        if applied:
            _current = self

    def undo(self) -> None:
        global _current
        if _current is self:
            _current = None
        self._patches.undo()

    def _after_fork_in_child(self) -> None:
        self.sampler.abandon()
        self.undo()
        self.in_child()


_current: SignalGuard | None = None


def _after_fork_in_child() -> None:
    guard = _current
    if guard is None:
        return
    try:
        guard._after_fork_in_child()
    except Exception as exc:  # never break the child; say why on its stderr
        print(f"pytest-scalene: cleaning up after fork failed: {exc!r}", file=sys.stderr)


run_in_fork_child(_after_fork_in_child)
