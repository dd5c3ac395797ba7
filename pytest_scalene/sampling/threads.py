"""The process's threads as the samplers read them: their current frames, and each one's CPU
clock, both safe to call from a signal handler at any moment of the test."""

from __future__ import annotations

import gc
import sys
import threading

# Bound at import: a test may delete or patch them.
from sys import _current_frames as _frames_now
from time import clock_gettime as _clock_gettime
from types import FrameType

# Before 3.12 a collection can start inside sys._current_frames() (it makes frame objects while
# it holds the runtime's list of threads) and run a finalizer that takes that lock again: the
# process hangs (CPython gh-106883; threading.local's dealloc does, and an A/B worker hung so on
# filelock's suite). Since 3.12 the collector runs only between bytecodes.
_COLLECTION_CAN_DEADLOCK = sys.version_info < (3, 12)
_gc_disable, _gc_enable, _gc_isenabled = gc.disable, gc.enable, gc.isenabled


def current_frames() -> dict[int, FrameType]:
    """sys._current_frames(), with the cyclic collector paused around it where it must be."""
    if not _COLLECTION_CAN_DEADLOCK or not _gc_isenabled():
        return _frames_now()
    _gc_disable()
    try:
        return _frames_now()
    finally:
        _gc_enable()


def thread_cpu(ident: int) -> float | None:
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


def only_main_thread(main_ident: int | None) -> bool:
    """Whether threading knows the main thread alone: thread_cpu can then read no other
    thread's time (the CPU time of threads it does not know goes to the main thread), and
    there is no other thread to charge or frame to walk."""
    known = threading._active  # type: ignore[attr-defined]
    return len(known) == 1 and main_ident in known
