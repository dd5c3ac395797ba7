"""The CPU sampler's timer: an interval timer (setitimer), or a POSIX timer on a free signal.

The sampler prefers ITIMER_PROF/SIGPROF (cpu clock) or ITIMER_REAL/SIGALRM (wall clock). When
that signal or timer is already in use (a conftest's handler, pytest-timeout's SIGALRM, a C
library's handler seen only by sigaction), it falls back to a POSIX timer (timer_create) on the
same clock (CLOCK_PROCESS_CPUTIME_ID or CLOCK_MONOTONIC, what setitimer uses) delivering a
free real-time signal, so the code under test keeps its signal and is still profiled.
POSIX timers, like interval timers, are not inherited by fork() children.

The functions of the signal module are bound here at import: during a test, signal_guard
replaces the module's attributes, and the sampler must keep talking to the real ones. Its
handler functions are taken from _signal, the C module under `signal`: the wrappers turn
SIG_DFL and SIG_IGN into enum members (0.4 us a call, a dozen calls a test); what the code under
test is shown goes through python_handler.
"""

from __future__ import annotations

import _signal as _c_signal
import ctypes
import ctypes.util
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

real_signal = _c_signal.signal
real_getsignal = _c_signal.getsignal
real_setitimer = signal.setitimer
real_getitimer = signal.getitimer

CLOCK_PROCESS_CPUTIME_ID = 2
CLOCK_MONOTONIC = 1
_SIGEV_SIGNAL = 0


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


_libc = _load_libc()
_SIGACTION = _Sigaction()  # os_handler's; signal handlers are set from the main thread only


def os_handler(signum: int) -> int | None:
    """The handler the kernel has for `signum` (0: default, 1: ignore), or None if unknown.
    A C-level handler (faulthandler.register, a preloaded library) is invisible to
    signal.getsignal, which keeps reporting SIG_DFL."""
    if _libc is None:
        return None
    # One structure, filled at each call: a buffer made and viewed per call (from_buffer)
    # cost 40 us a test in a profiled suite.
    if _libc.sigaction(signum, None, ctypes.byref(_SIGACTION)) != 0:
        return None
    return _SIGACTION.handler or 0


_trampoline: int | None = None  # Python's C-level handler, the same for every signal


def python_trampoline(signum: int) -> int | None:
    """The C function through which Python runs its handlers, read off `signum` right after
    a Python handler was installed on it."""
    global _trampoline
    if _trampoline is None:
        _trampoline = os_handler(signum)
    return _trampoline


@contextmanager
def keeping_c_handler(signum: int) -> Iterator[None]:
    """Whatever Python sets on `signum` in the block, the kernel keeps the action it had."""
    saved = _Sigaction()
    if _libc is None or _libc.sigaction(signum, None, ctypes.byref(saved)) != 0:
        yield
        return
    try:
        yield
    finally:
        _libc.sigaction(signum, ctypes.byref(saved), None)


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

    def until_expiry(self) -> float:
        return real_getitimer(self.itimer)[0]  # type: ignore[arg-type]

    def close(self) -> None:
        pass

    def busy(self) -> str | None:
        taken = signal_in_use(self.signum)
        if taken is None and self.running():
            taken = f"its interval timer is running ({self.description})"
        return taken


class PosixTimer:
    """timer_create on `clock_id`, delivering `signum` to the process (as setitimer does)."""

    def __init__(self, clock_id: int, signum: int) -> None:
        assert _libc is not None
        self.itimer: int | None = None
        self.signum = signum
        self.description = f"a POSIX timer on {signal_name(signum)}"
        event = _Sigevent(signo=signum, notify=_SIGEV_SIGNAL)
        self._id = ctypes.c_void_p()
        if _libc.timer_create(clock_id, ctypes.byref(event), ctypes.byref(self._id)) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"timer_create: {os.strerror(err)}")
        self._open = True

    def _set(self, value_s: float, interval_s: float) -> None:
        spec = _Itimerspec(_Timespec(*_split(interval_s)), _Timespec(*_split(value_s)))
        if self._open and _libc.timer_settime(self._id, 0, ctypes.byref(spec), None) != 0:  # type: ignore[union-attr]
            err = ctypes.get_errno()
            raise OSError(err, f"timer_settime: {os.strerror(err)}")

    def arm(self, interval_s: float) -> None:
        self._set(interval_s, interval_s)

    def disarm(self) -> None:
        self._set(0.0, 0.0)

    def until_expiry(self) -> float:
        spec = _Itimerspec()
        if not self._open or _libc.timer_gettime(self._id, ctypes.byref(spec)) != 0:  # type: ignore[union-attr]
            return 0.0
        return spec.value.sec + spec.value.nsec / 1e9

    def close(self) -> None:
        if self._open:
            self._open = False
            _libc.timer_delete(self._id)  # type: ignore[union-attr]


def _split(seconds: float) -> tuple[int, int]:
    whole = int(seconds)
    return whole, int(round((seconds - whole) * 1e9))


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
    spare = free_realtime_signal() if _libc is not None else None
    if spare is None:
        raise RuntimeError(f"{taken}, and no free real-time signal for a POSIX timer")
    clock_id = CLOCK_PROCESS_CPUTIME_ID if clock == "cpu" else CLOCK_MONOTONIC
    try:
        timer = PosixTimer(clock_id, spare)
    except OSError as exc:
        raise RuntimeError(f"{taken}, and a POSIX timer failed: {exc}") from None
    return timer, f"{taken}: sampled with {timer.description} instead"
