"""Memory, leak and copy-volume profiling through the allocator shim (native/shim.cpp).

The footprint is the live bytes of malloc & co. (their usable size) plus the arenas Python's object
allocator maps for small objects; Python's share is what comes through Python's allocator (its
arenas, its object and mem domains; not the raw one). While a test runs, the shim records a sample
when the footprint has moved by the threshold since the last one, when it passes the next leak
high-water step, and each time a thread has copied 2 x threshold bytes with memcpy, memmove and
their variants. At that moment, in the sampling thread, it records the thread's Python stack (code
objects and lines); it then raises a free real-time signal (with SA_RESTART), and this handler
drains the buffer at the main thread's next bytecode boundary, charging each sample to the
innermost profiled frame of its own stack (without a usable stack: to where its thread, or the main
thread, is when drained); the buffer loses nothing, and is drained again at the end.

The figures it writes, per line and per test, are the memory keys of core/extra_keys.py.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

# Bound at import: a test may delete them (attrs' suite deletes sys._getframe).
from sys import _getframe
from types import CodeType, FrameType, FunctionType, MethodType
from typing import Any

from ..core import extra_keys, runenv
from ..core.model import LineKey, TestProfile
from . import leaks, timeline
from .cpu_sampler import CpuSampler
from .resident import Resident
from .scope import CodeScope
from .shim_steps import COPY_STEP_THRESHOLDS, LEAK_STEPS_PER_THRESHOLD, TRACK_STEPS_PER_THRESHOLD
from .threads import current_frames
from .timers import free_realtime_signal, real_getsignal, real_signal

# Samples are signalled with a free real-time signal, taken for the session (again when a test
# took it): a test's own handler for any usual signal never receives them. SIGXCPU where there
# are none.
SIGNAL = signal.SIGXCPU
_siginterrupt = signal.siginterrupt
MB = float(1 << 20)
# Each profiled line's memory figures (0 on a line that only CPU samples reached).
LINE_FIGURES = ("peak_mb", "avg_mb", "alloc_mb", "python_alloc_fraction", "copy_mb", "copy_mb_s")
MAX_KNOWN_CODES = 100_000


@dataclass
class _LineMemory:
    function_line: int
    grown: int = 0  # net bytes of its grow samples
    allocated: int = 0  # bytes allocated in its samples' windows
    python: int = 0  # of those, Python's
    copied: int = 0
    footprints: list[float] = field(default_factory=list)  # MB above the test's start
    points: list[tuple[float, float]] = field(default_factory=list)
    tracked: list[int] = field(default_factory=list)  # the leak score's, ~1 MB apart
    held: list[int] = field(default_factory=list)  # every tracked allocation charged here


class MemorySampler:
    """The Collector: arms the shim around each test and turns its samples into line stats."""

    def __init__(self, scope: CodeScope, threshold: int, note: Callable[[str], None]) -> None:
        from .. import _native

        self.native = _native
        self.scope = scope
        self.threshold = threshold
        self.track_step = max(1, threshold // TRACK_STEPS_PER_THRESHOLD)
        self.leak_step = max(1, threshold // LEAK_STEPS_PER_THRESHOLD)
        self.copy_step = COPY_STEP_THRESHOLDS * threshold
        self.note = note
        self._main_ident = threading.main_thread().ident
        self._active = False
        self._draining = False  # in _on_signal
        self._previous_handler: Any = None
        self.signum: int = SIGNAL
        # Code objects seen in captured stacks, by address, held so that their addresses stay
        # theirs: stacks captured without the GIL come as addresses and are matched here.
        self._codes: dict[int, CodeType] = {}
        self._scanned = False
        self._resident = Resident()
        self._lines: dict[LineKey, _LineMemory] = {}
        self._rss_lines: dict[LineKey, int] = {}  # resident growth seen at CPU samples
        self._reset()
        self._start_ns = self._start_footprint = self._dropped = 0  # set by start_test
        self._next_leak_step = 0  # the footprint at which the leak score counts the next one
        # For the whole session: memory Python's arenas took before the hooks is not counted
        # when it is given back, so the earlier they are in, the truer the footprint.
        self.native.install_python_hooks()
        self._hooked = True

    def close(self) -> None:
        """Give the signal back and unhook Python's allocators (at the end of the session)."""
        self._give_signal_back()
        if self._hooked:
            self._hooked = False
            if not self.native.uninstall_python_hooks():
                self.note(
                    "another Python allocator was installed over pytest-scalene's; ours "
                    "stays in place as a pass-through"
                )

    def _reset(self) -> None:
        """The last test's tables cleared (kept when empty: most tests have no sample)."""
        if self._lines:
            self._lines = {}
        if self._rss_lines:
            self._rss_lines = {}
        self._points: list[tuple[float, float]] = [(0.0, 0.0)]
        self._grown = self._copied = 0  # the test's totals, lines or not

    # -- lifecycle ---------------------------------------------------------------------------
    def start_test(self, profile: TestProfile) -> None:
        if not self._holds_signal():
            self._take_signal()
        self._reset()
        self._resident.start()
        # One call reads what the test starts from and arms the shim (RuntimeError where it is
        # armed already: pytest run inside a profiled test).
        self._dropped, footprint, self._start_ns = self.native.begin_test(
            self.threshold, self.track_step, self.copy_step, self.signum
        )
        self._start_footprint = footprint
        self._next_leak_step = footprint + self.leak_step
        self._active = True

    def stop_test(self, profile: TestProfile) -> None:
        if not self._active:
            return
        self._active = False
        end_ns, samples, end_footprint, peak, dropped = self.native.end_test()
        try:
            self._drain(_getframe(1), samples)
            self._finish(profile, (end_ns - self._start_ns) / 1e9, end_footprint, peak)
        finally:
            if dropped > self._dropped:
                lost = dropped - self._dropped
                self.note(f"{lost} memory samples were lost (out of memory for the buffer)")

    # The signal is kept from the first test to the session's end (five system calls a test);
    # a test that left its own handler on it keeps it, and the next test takes a free one.
    def _holds_signal(self) -> bool:
        return self._previous_handler is not None and real_getsignal(self.signum) == self._on_signal

    def _take_signal(self) -> None:
        signum = free_realtime_signal()
        if signum is None:  # no real-time signals here: SIGXCPU, when nobody holds it
            if real_getsignal(SIGNAL) not in (signal.SIG_DFL, signal.SIG_IGN, None):
                raise RuntimeError(f"{SIGNAL.name} is already in use; memory not sampled")
            signum = SIGNAL
        self.signum, previous = signum, real_signal(signum, self._on_signal)
        self._previous_handler = signal.SIG_DFL if previous is None else previous
        # SA_RESTART: a sample must not make a blocking C call fail with EINTR.
        _siginterrupt(signum, False)

    def _give_signal_back(self) -> None:
        if self._holds_signal():
            real_signal(self.signum, self._previous_handler)
        self._previous_handler = None

    def on_cpu_sample(
        self, profile: TestProfile, frame: FrameType | None, key: LineKey | None, cpu_s: float
    ) -> None:
        """At each CPU sample: the resident growth since the last one goes to the main thread's
        line (page faults take CPU time, so the line that touches memory is sampled)."""
        if not self._active or frame is None:  # None: the test's end, read by _finish
            return
        grown = self._resident.step()
        if key is not None and grown > 0:
            self._rss_lines[key] = self._rss_lines.get(key, 0) + grown

    # -- samples -----------------------------------------------------------------------------
    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        # Python runs a handler again within itself when a signal comes meanwhile: a drain that
        # allocates past a sampling step would recurse. Its samples wait for the next drain.
        if not self._active or self._draining:
            return
        self._draining = True
        try:
            self._drain(frame)
        except Exception as exc:  # the profiler must never break the test
            self.native.disarm()
            self._active = False
            self.note(f"memory sampler stopped after an internal error: {exc!r}")
        finally:
            self._draining = False

    def _drain(self, main_frame: FrameType | None, samples: list[Any] | None = None) -> None:
        """The shim's samples (taken now, unless given) into the test's lines and timeline."""
        if samples is None:
            samples = self.native.take_samples()
        if not samples:
            return
        frames: dict[int, FrameType] | None = None
        self._scanned = False
        start_ns, start_fp = self._start_ns, self._start_footprint
        for sample in samples:
            kind, tracked, footprint, allocated, freed, python, copied, t_ns, thread, stack = sample
            if frames is None and any(isinstance(code, int) for code, _ in stack):
                frames = self._known_frames()
            located, whole = self._locate_stack(stack)
            if located is None and not whole:  # no stack (a thread Python does not know),
                # or one cut short or not matched: where the thread is now is the best guess
                frame = main_frame
                if thread != self._main_ident:
                    if frames is None:
                        frames = self._known_frames()
                    frame = frames.get(thread, main_frame)  # threads Python does not know: main's
                located = self.scope.locate(frame)
            line = None
            if located is not None:
                line = self._lines.get(located[0])
                if line is None:
                    line = self._lines[located[0]] = _LineMemory(located[1])
            if kind == self.native.COPY:
                self._copied += copied
                if line is not None:
                    line.copied += copied
                continue
            if kind == self.native.GROW:
                self._grown += allocated - freed
            t_s = max(0.0, (t_ns - start_ns) / 1e9)
            mb = (footprint - start_fp) / MB
            self._points.append((t_s, mb))
            scored = tracked >= 0 and footprint >= self._next_leak_step
            if scored:
                self._next_leak_step = footprint + self.leak_step
            if line is None:
                continue
            if kind == self.native.GROW:
                line.grown += allocated - freed
            line.allocated += allocated
            line.python += python
            line.footprints.append(mb)
            line.points.append((t_s, mb))
            if tracked >= 0:
                line.held.append(tracked)
                if scored:
                    line.tracked.append(tracked)

    def _known_frames(self) -> dict[int, FrameType]:
        """The other threads' current frames; their code objects join the known ones, so that
        stacks captured without the GIL (addresses only) can be matched."""
        frames = current_frames()
        # This very frame: kept in a local, it would make a reference cycle that keeps the
        # test's frames (and their memory) alive until the next gc.
        frames.pop(self._main_ident, None)
        for frame in frames.values():
            walk: FrameType | None = frame
            while walk is not None:
                self._remember(walk.f_code)
                walk = walk.f_back
        return frames

    def _remember_profiled_modules(self) -> None:
        """The code objects of profiled modules (functions, methods, and the code nested in
        them: comprehensions, lambdas, inner functions): a thread that allocated without the
        GIL may have finished before the drain, so its frames are gone."""
        pending: list[Any] = []
        for module in list(sys.modules.values()):
            filename = getattr(module, "__file__", None)
            if isinstance(filename, str) and self.scope.relative_name(filename) is not None:
                pending.extend(vars(module).values())
        seen: set[int] = set()
        while pending:
            item = pending.pop()
            if id(item) in seen:
                continue
            seen.add(id(item))
            if isinstance(item, CodeType):
                if self.scope.relative_name(item.co_filename) is not None:
                    self._remember(item)
                    pending.extend(c for c in item.co_consts if isinstance(c, CodeType))
            elif isinstance(item, (staticmethod, classmethod)):
                pending.append(item.__func__)
            elif isinstance(item, property):
                pending.extend((item.fget, item.fset, item.fdel))
            elif isinstance(item, type):
                pending.extend(vars(item).values())
            elif isinstance(item, (FunctionType, MethodType)):
                pending.append(item.__code__)

    def _remember(self, code: CodeType) -> None:
        if len(self._codes) < MAX_KNOWN_CODES:
            self._codes.setdefault(id(code), code)

    def _locate_stack(
        self, stack: tuple[tuple[Any, int], ...]
    ) -> tuple[tuple[LineKey, int] | None, bool]:
        """The innermost profiled frame of a stack the shim captured in the sampling thread,
        and whether the whole stack was seen (then no profiled frame means none was running)."""
        whole = 0 < len(stack) < self.native.WHERE_DEPTH
        for code, lineno in stack:
            # A handler's frame sits above the frame it interrupted: met first, innermost out
            if (code if isinstance(code, int) else id(code)) in _HANDLER_ADDRESSES:
                return None, True  # allocated by the profiler's own handler: no line's doing
            if isinstance(code, int):  # captured without the GIL: an address only
                # Only a code object held here can be named: an address alone may be reused.
                address = code
                code = self._codes.get(address)
                if code is None and not self._scanned:
                    self._scanned = True  # once per drain: a miss costs a walk of the modules
                    self._remember_profiled_modules()
                    code = self._codes.get(address)
                if code is None:
                    whole = False
                    continue
            else:
                self._remember(code)
            found = self.scope.locate_code(code, lineno)
            if found is not None:
                return found, True
        return None, whole

    # -- results -----------------------------------------------------------------------------
    def _finish(self, profile: TestProfile, elapsed_s: float, end_fp: int, peak: int) -> None:
        """The test's figures: `end_fp` and `peak`, the shim's footprint and peak at its end."""
        test = profile.extra
        start_fp = self._start_footprint
        points = self._points
        points.append((elapsed_s, (end_fp - start_fp) / MB))
        test[extra_keys.PEAK_MB] = max(0.0, (peak - start_fp) / MB)
        test[extra_keys.ALLOC_MB] = max(0.0, self._grown / MB)
        copied_mb = test[extra_keys.COPY_MB] = self._copied / MB
        test[extra_keys.COPY_MB_S] = copied_mb / elapsed_s if elapsed_s > 0 else 0.0
        resident = self._resident.peak_growth()
        if resident is not None:
            test[extra_keys.RSS_MB] = max(0.0, resident / MB)
        test[extra_keys.TIMELINE] = timeline.reduce(points)
        if not self._lines and not self._rss_lines and not profile.lines:
            # No sample landed (most short tests): no line figures, no tracked allocation.
            # Empty tuples, not lists: no object the cyclic collector walks for every test.
            test[extra_keys.RETAINED] = test[extra_keys.LEAKS] = test[extra_keys.HELD] = ()
            return
        native = self.native
        evidence = []
        held: dict[LineKey, int] = {}
        for key, line in self._lines.items():
            stats = profile.line(key, line.function_line)
            extra = stats.extra
            extra[extra_keys.PEAK_MB] = max([0.0, *line.footprints])
            extra[extra_keys.AVG_MB] = (
                max(0.0, sum(line.footprints) / len(line.footprints)) if line.footprints else 0.0
            )
            extra[extra_keys.ALLOC_MB] = max(0.0, line.grown / MB)
            extra[extra_keys.PYTHON_ALLOC_FRACTION] = (
                min(1.0, line.python / line.allocated) if line.allocated > 0 else 0.0
            )
            extra[extra_keys.COPY_MB] = line.copied / MB
            seconds = stats.cpu_s if stats.cpu_s > 0 else elapsed_s
            extra[extra_keys.COPY_MB_S] = line.copied / MB / seconds if seconds > 0 else 0.0
            if line.points:
                extra[extra_keys.TIMELINE] = timeline.reduce(line.points)
            held[key] = sum(1 for i in line.held if not native.leak_freed(i))
            if line.tracked:
                frees = sum(1 for i in line.tracked if native.leak_freed(i))
                grown_mb = extra[extra_keys.ALLOC_MB]
                found = leaks.LineEvidence(key, len(line.tracked), frees, grown_mb)
                extra[extra_keys.LEAK_PROBABILITY] = found.probability
                extra[extra_keys.LEAK_RATE_MB_S] = leaks.rate_mb_s(found.grown_mb, elapsed_s)
                evidence.append(found)
        if resident is not None:
            for key, grown in self._rss_lines.items():
                stats = profile.lines.get(key)
                if stats is not None:
                    stats.extra[extra_keys.RSS_MB] = grown / MB
        for stats in profile.lines.values():  # lines with CPU samples only: nothing sampled
            for name in LINE_FIGURES:
                stats.extra.setdefault(name, 0.0)
            if resident is not None:
                stats.extra.setdefault(extra_keys.RSS_MB, 0.0)
        grew = leaks.footprint_grew(start_fp, end_fp)
        profile.extra[extra_keys.RETAINED] = leaks.retained(end_fp - start_fp, held)
        suspects = leaks.report(evidence, grew, elapsed_s, leaks.retained_at(profile.extra))
        # Likely leaks only once a run again confirms them (gates/leak_confirm.py).
        profile.extra[extra_keys.LEAKS] = []
        profile.extra[extra_keys.HELD] = [{**s, "why": leaks.NOT_RUN_AGAIN} for s in suspects]


# The samplers' signal handlers run on top of the frame they interrupt. What they allocate (a new
# 1 MiB object arena crosses a leak step) would be charged to that line: it set a line's peak.
_HANDLER_ADDRESSES = frozenset(
    id(handler.__code__) for handler in (CpuSampler._on_signal, MemorySampler._on_signal)
)


def attach(profiler: Any, add_cleanup: Callable[[Callable[[], None]], None]) -> None:
    """Add the memory collector to `profiler` when the shim is active in this process, or note
    once why memory columns are missing. `add_cleanup` (config.add_cleanup) unhooks at the end.
    Called only where memory is profiled: a session with --profile-memory=no never imports
    this module."""
    options = profiler.options
    if not runenv.shim_loaded():
        if options.enabled:
            reason = runenv.shim_problem() or "the allocator shim is not preloaded"
            profiler.note(f"memory, leak and copy columns are absent: {reason}")
        return
    allocator = runenv.other_allocator()
    if allocator and options.enabled:
        profiler.note(
            f"memory is profiled through {allocator} (LD_PRELOAD): the shim forwards malloc & co. "
            "to it, so sizes are its own (its size classes)"
        )
    sampler = MemorySampler(profiler.scope, options.memory_threshold, profiler.note)
    profiler.collectors.append(sampler)
    profiler.listeners.append(sampler)  # resident growth per line, at the CPU samples
    add_cleanup(sampler.close)
