"""Blocking calls, patched so the main thread keeps waking up to run the sampler's handler.

CPython runs signal handlers in the main thread only, between bytecodes. A main thread blocked
in `Thread.join()` or `Condition.wait()` would hold back every sample while its worker threads
run. Each patch waits in slices of `sys.getswitchinterval()` instead, with the same result and
the same timeout semantics. The patches go in at the first profiled test and stay until the
session ends (replacing class attributes per test cost 9 us a test, and invalidated the
interpreter's caches of those classes); outside a profiled test they call the original at once.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from .patches import Patches

_original_join = threading.Thread.join
_original_cond_wait = threading.Condition.wait
_original_sleep = time.sleep
_slicing = 0  # how many BlockingPatches are on (a pytester session inside a profiled test: 2)


def _deadline(timeout: float | None) -> float | None:
    # A negative timeout does not block, as unpatched: join() waits max(timeout, 0) and
    # Condition.wait() only tries the lock. (Code computing `deadline - now` passes one when
    # the machine is slow; treating it as "forever" hung a profiled suite.)
    return None if timeout is None else time.monotonic() + max(timeout, 0.0)


def _slice(deadline: float | None) -> float:
    step = sys.getswitchinterval()
    if deadline is None:
        return step
    return max(0.0, min(step, deadline - time.monotonic()))


def _join(self: threading.Thread, timeout: float | None = None) -> None:
    if not _slicing:
        return _original_join(self, timeout)
    deadline = _deadline(timeout)
    while True:
        _original_join(self, _slice(deadline))
        if not self.is_alive() or (deadline is not None and time.monotonic() >= deadline):
            return


def _cond_wait(self: threading.Condition, timeout: float | None = None) -> bool:
    # Condition.wait with only the waiter's acquire sliced. Slicing whole waits would lose a
    # notify() that lands between a slice's timeout and its re-taking the lock (the notifier
    # then releases a waiter that already gave up), and the next slice would wait forever.
    if not _slicing:
        return _original_cond_wait(self, timeout)
    if not self._is_owned():  # type: ignore[attr-defined]
        raise RuntimeError("cannot wait on un-acquired lock")
    deadline = _deadline(timeout)
    waiter = threading.Lock()
    waiter.acquire()
    self._waiters.append(waiter)  # type: ignore[attr-defined]
    saved_state = self._release_save()  # type: ignore[attr-defined]
    gotit = False
    try:
        while not gotit:
            gotit = waiter.acquire(True, _slice(deadline))
            if deadline is not None and time.monotonic() >= deadline:
                break
        return gotit
    finally:
        self._acquire_restore(saved_state)  # type: ignore[attr-defined]
        if not gotit:
            with contextlib.suppress(ValueError):  # a notify() took it meanwhile
                self._waiters.remove(waiter)  # type: ignore[attr-defined]


def _sleep(seconds: float) -> None:
    if seconds <= 0 or not _slicing:
        return _original_sleep(seconds)
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        _original_sleep(min(left, sys.getswitchinterval()))


_PATCHES: list[tuple[Any, str, Callable[..., Any]]] = [
    (threading.Thread, "join", _join),
    (threading.Condition, "wait", _cond_wait),
    (time, "sleep", _sleep),
]


class BlockingPatches(Patches):
    """Puts the patches in (in the main thread, once) and turns slicing on for a test; pause()
    turns it off between tests, undo() restores exactly what was there before."""

    def __init__(self) -> None:
        super().__init__()
        self._on = False

    def apply(self) -> bool:  # type: ignore[override]
        global _slicing
        if not self._saved and not super().apply(_PATCHES):
            return False
        if not self._on:
            self._on = True
            _slicing += 1
        return True

    def pause(self) -> None:
        global _slicing
        if self._on:
            self._on = False
            _slicing -= 1

    def undo(self) -> None:
        self.pause()
        super().undo()
