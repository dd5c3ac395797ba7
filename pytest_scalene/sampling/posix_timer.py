"""The sampler's calls into libc through ctypes, for what is not on its per-test path: POSIX
timers (timers.choose falls back to one where the usual signal or timer is taken), keeping a
C-level handler while Python sets its own, and the kernel's handler where the _timer_calls
extension is missing. Imported only where one of them is needed: ctypes costs a session 1.5 ms
to import and keeps 16 modules alive to the interpreter's exit.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Iterator
from contextlib import contextmanager

CLOCK_PROCESS_CPUTIME_ID = 2
CLOCK_MONOTONIC = 1
_SIGEV_SIGNAL = 0


class _Timespec(ctypes.Structure):
    _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("interval", _Timespec), ("value", _Timespec)]


class _Sigaction(ctypes.Structure):  # struct sigaction: its handler first, then 248 bytes
    # (more than the rest of it on every Linux ABI)
    _fields_ = [("handler", ctypes.c_void_p), ("_rest", ctypes.c_byte * 248)]


class _Sigevent(ctypes.Structure):  # the kernel's 64-byte struct sigevent
    _fields_ = [
        ("value", ctypes.c_void_p),
        ("signo", ctypes.c_int),
        ("notify", ctypes.c_int),
        ("_pad", ctypes.c_byte * (64 - ctypes.sizeof(ctypes.c_void_p) - 8)),
    ]


def _load_libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if not hasattr(libc, "timer_create"):  # glibc < 2.34 keeps it in librt
            name = ctypes.util.find_library("rt")
            libc = ctypes.CDLL(name, use_errno=True) if name else libc
        libc.sigaction  # noqa: B018 - raises AttributeError where there is none
    except (OSError, AttributeError):
        return None
    return libc


libc = _load_libc()
_SIGACTION = _Sigaction()  # kernel_handler's; signal handlers are set from the main thread only


def kernel_handler(signum: int) -> int | None:
    """timers.os_handler without the extension."""
    if libc is None:
        return None
    # One structure, filled at each call: a buffer made and viewed per call (from_buffer)
    # cost 40 us a test in a profiled suite.
    if libc.sigaction(signum, None, ctypes.byref(_SIGACTION)) != 0:
        return None
    return _SIGACTION.handler or 0


@contextmanager
def keeping_c_handler(signum: int) -> Iterator[None]:
    """Whatever Python sets on `signum` in the block, the kernel keeps the action it had."""
    saved = _Sigaction()
    if libc is None or libc.sigaction(signum, None, ctypes.byref(saved)) != 0:
        yield
        return
    try:
        yield
    finally:
        libc.sigaction(signum, ctypes.byref(saved), None)


class PosixTimer:
    """timer_create on `clock_id`, delivering `signum` to the process (as setitimer does)."""

    def __init__(self, clock_id: int, signum: int, signal_name: str) -> None:
        assert libc is not None
        self.itimer: int | None = None
        self.signum = signum
        self.description = f"a POSIX timer on {signal_name}"
        event = _Sigevent(signo=signum, notify=_SIGEV_SIGNAL)
        self._id = ctypes.c_void_p()
        if libc.timer_create(clock_id, ctypes.byref(event), ctypes.byref(self._id)) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"timer_create: {os.strerror(err)}")
        self._open = True

    def _set(self, value_s: float, interval_s: float) -> None:
        spec = _Itimerspec(_Timespec(*_split(interval_s)), _Timespec(*_split(value_s)))
        if self._open and libc.timer_settime(self._id, 0, ctypes.byref(spec), None) != 0:  # type: ignore[union-attr]
            err = ctypes.get_errno()
            raise OSError(err, f"timer_settime: {os.strerror(err)}")

    def arm(self, interval_s: float) -> None:
        self._set(interval_s, interval_s)

    def disarm(self) -> None:
        self._set(0.0, 0.0)

    def until_expiry(self) -> float:
        spec = _Itimerspec()
        if not self._open or libc.timer_gettime(self._id, ctypes.byref(spec)) != 0:  # type: ignore[union-attr]
            return 0.0
        return spec.value.sec + spec.value.nsec / 1e9

    def close(self) -> None:
        if self._open:
            self._open = False
            libc.timer_delete(self._id)  # type: ignore[union-attr]


def _split(seconds: float) -> tuple[int, int]:
    whole = int(seconds)
    return whole, int(round((seconds - whole) * 1e9))
