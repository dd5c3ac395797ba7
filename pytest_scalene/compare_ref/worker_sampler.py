"""The A/B worker's sampler (worker.py): each thread's CPU time charged to the lines and
functions of the tree it runs.

The timer is a POSIX timer on the monotonic clock delivering SIGPROF every 0.5 ms (ctypes
timer_create): ITIMER_PROF, a CPU-time timer, fires at most at the kernel's tick rate (250 per
CPU-second measured here, whatever interval is asked), too few samples for a function's share
of a 20 ms run. What each sample counts is CPU time (each thread's own CPU clock since the last
signal), so a sample that arrives while the process waits or is descheduled weighs ~nothing.
Both sides pay the same signals. Without timer_create (in libc from glibc 2.34, in librt
before), ITIMER_PROF: a CPU-time timer, under which the process's CPU clock that times the
runs advances only at the kernel's ticks (4 ms here), too coarse for a test of milliseconds.

Like worker.py, this module imports nothing from pytest_scalene and is loaded by path in a
worker session.
"""

from __future__ import annotations

import ctypes
import gc
import os
import signal
import sys
import threading
import time
import traceback
from typing import Any

_clock_gettime = time.clock_gettime  # bound now: a test may patch the time module
SAMPLE_INTERVAL_S = 0.0005  # a POSIX timer on CLOCK_MONOTONIC: ~2000 signals per second
FALLBACK_INTERVAL_S = 0.002  # ITIMER_PROF: the kernel fires it at most ~250 times per CPU-second
CLOCK_MONOTONIC = 1
_UNSEEN = object()  # a code object the sampler has not met yet
NOT_PROJECT_PARTS = ("site-packages", "dist-packages", ".venv", "venv", ".tox", ".nox")


class _Sigevent(ctypes.Structure):  # struct sigevent (64 bytes); SIGEV_SIGNAL is 0
    _fields_ = [("value", ctypes.c_void_p), ("signo", ctypes.c_int), ("notify", ctypes.c_int)]
    _fields_ += [("_pad", ctypes.c_byte * (64 - ctypes.sizeof(ctypes.c_void_p) - 8))]


class _Itimerspec(ctypes.Structure):  # interval and first expiry, each (sec, nsec)
    _fields_ = [(name, ctypes.c_long) for name in ("i_s", "i_ns", "v_s", "v_ns")]


# The same read as sampling/threads.py's thread_cpu: this module imports nothing from the
# package (the REF tree's worker may run beside another version of it).
def thread_cpu_s(ident: int) -> float | None:
    """The CPU time of the thread `ident` (a key of sys._current_frames()), None once it has
    ended or when it is unknown (a thread started outside `threading`). By the clock of its
    kernel thread id (Linux's MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)): the kernel refuses
    the id of a thread that is gone. pthread_getcpuclockid(ident) reads the thread's pthread
    struct instead, in its stack, which is unmapped when a detached thread exits: a sampler
    whose snapshot of the threads was a moment old crashed the process (SIGSEGV, filelock's
    suite, 100 threads starting and ending)."""
    thread = threading._active.get(ident)  # type: ignore[attr-defined]
    native = getattr(thread, "native_id", None)
    if native is None:
        return None
    try:
        return _clock_gettime(((~native) << 3) | 6)
    except (OSError, OverflowError):
        return None


# Before 3.12 a collection that starts inside sys._current_frames() can run a finalizer that
# takes the lock it holds: the worker hangs (CPython gh-106883; sampling/threads.py).
_COLLECTION_CAN_DEADLOCK = sys.version_info < (3, 12)


def current_frames() -> dict[int, Any]:
    """sys._current_frames(), with the cyclic collector paused around it where it must be."""
    if not _COLLECTION_CAN_DEADLOCK or not gc.isenabled():
        return sys._current_frames()
    gc.disable()
    try:
        return sys._current_frames()
    finally:
        gc.enable()


class FineTimer:
    """SIGPROF from a POSIX timer on the monotonic clock; ITIMER_PROF where there is none."""

    def __init__(self) -> None:
        self.timer = ctypes.c_void_p()
        self.libc: Any = None
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if not hasattr(libc, "timer_create"):  # glibc < 2.34 keeps it in librt
                libc = ctypes.CDLL("librt.so.1", use_errno=True)
            event = _Sigevent(None, signal.SIGPROF, 0)
            if libc.timer_create(CLOCK_MONOTONIC, ctypes.byref(event), ctypes.byref(self.timer)):
                raise OSError(ctypes.get_errno(), "timer_create")
            self.libc = libc
        except (OSError, AttributeError):  # no timer_create anywhere
            pass

    def arm(self, interval_s: float) -> None:
        if self.libc is None:
            signal.setitimer(signal.ITIMER_PROF, FALLBACK_INTERVAL_S, FALLBACK_INTERVAL_S)
            return
        ns = int(interval_s * 1e9)
        spec = _Itimerspec(ns // 10**9, ns % 10**9, ns // 10**9, ns % 10**9)
        self.libc.timer_settime(self.timer, 0, ctypes.byref(spec), None)

    def disarm(self) -> None:
        if self.libc is None:
            signal.setitimer(signal.ITIMER_PROF, 0, 0)
        else:
            self.libc.timer_settime(self.timer, 0, ctypes.byref(_Itimerspec()), None)


def line_number(frame: Any) -> int:
    """The line a frame is at, never None: f_lineno is None on 3.11+ when the frame is on an
    instruction without a line (a loop's back-edge, a generator's resumption); then the code
    object's line table for f_lasti, else the function's first line."""
    line = frame.f_lineno
    if isinstance(line, int):
        return line
    code = frame.f_code
    lasti = getattr(frame, "f_lasti", -1)
    if lasti is not None and lasti >= 0 and hasattr(code, "co_lines"):
        for start, end, found in code.co_lines():
            if start <= lasti < end and found is not None:
                return found
    return code.co_firstlineno or 0


def function_of(qualname: str) -> str:
    """The function a code object's time is judged under: a comprehension, generator
    expression or lambda counts as the function it is in (3.12 inlines comprehensions)."""
    while ".<locals>.<" in qualname:
        head, _, tail = qualname.rpartition(".<locals>.")
        if not tail.startswith("<"):
            break
        qualname = head
    return qualname


class LineSampler:
    """CPU time per line of the tree's files, sampled: at each timer signal, each thread's
    CPU time since the previous signal (its own CPU clock) goes to the innermost frame of that
    thread that is in the tree (time in libraries to the tree's line that called them). A
    thread that waits (a `join`) gets next to nothing, the thread doing the work gets its time,
    and a long native call counts fully although the signals that fall in it arrive as one.
    The same time also goes once to every distinct function of the tree on that stack
    (inclusive: a caller holds its callees' time, a recursive function each sample once)."""

    def __init__(self, tree: str) -> None:
        self.tree = os.path.realpath(tree) + os.sep
        self.counts: dict[tuple[str, str, int], float] = {}  # pooled over runs: see pool()
        self._run_counts: dict[tuple[str, str, int], float] = {}  # this run's
        # This run's CPU time and samples per function (file, function_of(qualname)): its
        # self time, and its inclusive time.
        self.run: dict[tuple[str, str], list[float]] = {}
        self.inclusive: dict[tuple[str, str], list[float]] = {}
        self._codes: dict[int, tuple[str, str] | None] = {}  # id(code) -> its function
        self._kept: list[Any] = []  # the code objects of _codes, alive so no id is reused
        self.timer = FineTimer()
        self._names: dict[str, str | None] = {}
        self._last: dict[int, float] = {}  # thread ident -> its CPU clock at the last sample
        self.error = ""  # the first exception a sample hit since start(): see _sample
        self.bottom: Any = None  # the code of the frame that runs the test (Worker._run)
        self._sampling = False  # in the signal handler

    def _name(self, filename: str) -> str | None:
        if filename not in self._names:
            real = os.path.realpath(filename)
            name = None
            if not filename.startswith("<") and real.startswith(self.tree):  # not "<string>"
                rel = real[len(self.tree) :]
                if not any(part in NOT_PROJECT_PARTS for part in rel.split(os.sep)):
                    name = rel.replace(os.sep, "/")
            self._names[filename] = name
        return self._names[filename]

    def _function(self, code: Any) -> tuple[str, str] | None:
        """The function a code object's time goes to: (file, function_of(qualname)), None
        outside the tree; remembered by the code's id."""
        name = self._name(code.co_filename)
        qualname = getattr(code, "co_qualname", code.co_name)
        found = None if name is None else (name, function_of(qualname))
        self._kept.append(code)
        self._codes[id(code)] = found
        return found

    @staticmethod
    def _cpu_of(ident: int) -> float | None:
        return thread_cpu_s(ident)

    def _sample(self, signum: int, frame: Any) -> None:
        # A signal handler runs inside the test's code: an exception here would change what
        # the test computes, so it is kept for the run's reply, which then is not judged.
        # A signal during a slow sample (many threads) is dropped, not nested: the next
        # sample charges the time since the last one.
        if self._sampling:
            return
        self._sampling = True
        try:
            self._sample_threads(frame if frame is not None else sys._getframe(1))
        except Exception as exc:
            if not self.error:
                self.error = error_line(exc) + where_line(exc.__traceback__)
        finally:
            self._sampling = False

    def _sample_threads(self, interrupted: Any) -> None:
        # This thread's entry is this very frame: bound to `top`, it would hold itself (a
        # cycle) and, through f_back, the interrupted frames and their locals until the next
        # collection (filelock's test that a deleted lock is gone failed so in every worker).
        # The interrupted frame stands in for it.
        frames = current_frames()
        frames[threading.get_ident()] = interrupted
        for ident, top in frames.items():
            now = self._cpu_of(ident)
            if now is None:
                continue
            weight = now - self._last.get(ident, 0.0)  # a thread started since: all its time
            self._last[ident] = now
            self._charge(top, weight)

    def _charge(self, frame: Any, weight: float) -> None:
        # The whole stack is walked (the inclusive figures), in the signal handler: one dict
        # look-up per frame, by the code object's id (its hash is not cached).
        codes, bottom = self._codes, self.bottom
        on_stack: set[tuple[str, str]] = set()
        while frame is not None:
            code = frame.f_code
            if code is bottom:  # the worker's own frames from here down: not the test's time
                break
            function = codes.get(id(code), _UNSEEN)
            if function is _UNSEEN:
                function = self._function(code)
            if function is not None:
                if not on_stack:  # the innermost frame in the tree: its line's self time
                    qualname = getattr(code, "co_qualname", code.co_name)
                    key = (function[0], qualname, line_number(frame))
                    counts = self._run_counts
                    counts[key] = counts.get(key, 0.0) + weight
                    found = self.run.setdefault(function, [0.0, 0])
                    found[0] += weight
                    found[1] += 1
                on_stack.add(function)
            frame = frame.f_back
        inclusive = self.inclusive
        for function in on_stack:
            found = inclusive.get(function)
            if found is None:
                inclusive[function] = [weight, 1]
            else:
                found[0] += weight
                found[1] += 1

    def start(self) -> None:
        self._last = {}
        self._run_counts = {}
        self.run = {}
        self.inclusive = {}
        self._codes, self._kept = {}, []  # per run: the code objects kept alive stay few
        self.error = ""
        for ident in current_frames():
            now = self._cpu_of(ident)
            if now is not None:
                self._last[ident] = now
        signal.signal(signal.SIGPROF, self._sample)
        self.timer.arm(SAMPLE_INTERVAL_S)

    def stop(self) -> None:
        self.timer.disarm()

    def pool(self, scale: float = 1.0) -> None:
        """This run's line figures into the pooled ones, times `scale`: a benchmark test's
        run is scaled to `inner` calls of its function, as its time is (worker.py), since
        each side repeats the function a different number of times per use."""
        counts = self.counts
        for key, weight in self._run_counts.items():
            counts[key] = counts.get(key, 0.0) + weight * scale
        self._run_counts = {}

    def take_run(self) -> list[list[Any]]:
        return [[f, q, round(w, 7), n] for (f, q), (w, n) in sorted(self.run.items())]

    def take_inclusive(self) -> list[list[Any]]:
        return [[f, q, round(w, 7), n] for (f, q), (w, n) in sorted(self.inclusive.items())]

    def take(self) -> list[list[Any]]:
        found = [[f, q, line, round(n, 6)] for (f, q, line), n in sorted(self.counts.items())]
        self.counts = {}
        return found


def error_line(exc: BaseException) -> str:
    """An exception as one short line: its type and the first line of its message."""
    text = f"{type(exc).__name__}: {exc}".strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


def where_line(tb: Any, frames: int = 3) -> str:
    """The last frames of a traceback on one line, innermost first."""
    found = traceback.extract_tb(tb)[-frames:]
    shown = " <- ".join(f"{os.path.basename(f.filename)}:{f.lineno} {f.name}" for f in found[::-1])
    return f" (at {shown})" if shown else ""
