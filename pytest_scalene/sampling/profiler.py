"""Runs the samplers around one test at a time and collects the results in a SessionProfile."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from time import perf_counter  # bound now: a test may patch or delete time.perf_counter
from typing import Any, NamedTuple, Protocol

from ..config.options import ProfileOptions
from ..core import extra_keys
from ..core.model import SessionProfile, TestProfile
from ..core.runenv import MARKER, has_marker
from .blocking_patches import BlockingPatches
from .cpu_sampler import CpuSampler, SampleListener
from .held_signal import SignalBusy
from .scope import CodeScope
from .signal_guard import SignalGuard

# TestProfile.extra: the test is its process's first profiled test, so its first call carries
# the process's warm-up (imports made on first use, first calls, caches filled): how much
# depends on which tests ran before, not on the test's code (gates/judging.py).


class Collector(Protocol):
    """A metric source (memory, GPU...) started and stopped around each test."""

    def start_test(self, profile: TestProfile) -> None: ...

    def stop_test(self, profile: TestProfile) -> None: ...


class Profiler:
    def __init__(self, options: ProfileOptions, rootdir: str) -> None:
        self.options = options
        self.scope = CodeScope(rootdir, options.include, options.exclude)
        self.session = SessionProfile(interval_s=options.interval_s, clock=options.clock)
        self.not_measured: set[str] = set()  # unchanged since the code map (selection/)
        self.collectors: list[Collector] = []
        self.listeners: list[SampleListener] = []
        self._patches = BlockingPatches()
        self._warmed_up = False  # a test has been profiled in this process
        self._sampler: CpuSampler | None = None
        self._guard: SignalGuard | None = None
        self._current: TestProfile | None = None  # the test the guard speaks for

    def close(self) -> None:
        """The end of the session: the sampler's signal given back, the patches undone."""
        if self._guard is not None:
            self._guard.undo()
        self._patches.undo()
        if self._sampler is not None:
            self._sampler.close()

    def wants(self, item: Any) -> bool:
        """Whether a test is profiled: --profile (or a gate that needs profiles) unless the
        code map shows it unchanged, or a perf_budget marker on the test."""
        if self.options.enabled and (not self.not_measured or item.nodeid not in self.not_measured):
            return True  # before the marker: looking one up walks the test's parents
        return has_marker(item) and item.get_closest_marker(MARKER) is not None

    def note(self, message: str) -> None:
        """A one-time remark for the report (why a metric is missing, a conflict...)."""
        if message not in self.session.notes:
            self.session.notes.append(message)

    def _session_sampler(self) -> CpuSampler:
        """The CPU sampler and its signal guard, made at the first test and kept for the
        session: one of each per test cost 4 us a test."""
        if self._sampler is None:
            self._sampler = CpuSampler(
                self.scope,
                self.options.interval_s,
                self.options.clock,
                on_error=self._on_sampler_error,
            )
            # The profiler's own list: attach() calls may add to it between tests.
            self._sampler.listeners = self.listeners
            self._guard = SignalGuard(self._sampler, self._step_aside, self._patches.undo)
        return self._sampler

    def _step_aside(self, reason: str) -> None:
        """The test took the sampler's signal or timer: its CPU figures are partial."""
        profile = self._current
        if profile is not None:
            self.note(f"{profile.nodeid}: {reason}")
            profile.extra[extra_keys.CPU_SAMPLING_SKIPPED] = reason  # budgets say so

    def _on_sampler_error(self, exc: BaseException) -> None:
        self.note(f"CPU sampler stopped after an internal error: {exc!r}")

    @contextmanager
    def profiling(self, nodeid: str) -> Iterator[TestProfile]:
        """Profile the enclosed block as test `nodeid`. Profiler failures never hide the test's
        own outcome: they become notes, and the block runs as it would without the profiler."""
        running = self.start_test(nodeid)
        try:
            yield running.profile
        finally:
            self.stop_test(running)

    def start_test(self, nodeid: str) -> RunningTest:
        """Start profiling test `nodeid` (profiling() without a context manager, for the
        per-test hook: one less generator a test); stop_test() must follow, whatever happens."""
        profile = self.session.tests.get(nodeid)
        if profile is None:
            profile = self.session.tests[nodeid] = TestProfile(nodeid)
            if not self._warmed_up:
                profile.extra[extra_keys.WARM_UP] = True
                self._warmed_up = True
        sampler = self._sampler or self._session_sampler()
        started: list[Collector] = []
        for collector in self.collectors:
            try:
                collector.start_test(profile)
                started.append(collector)
            except Exception as exc:
                self.note(f"{type(collector).__name__} failed to start: {exc!r}")
        sampling: CpuSampler | None = sampler
        try:
            sampler.start(profile)
        except SignalBusy as exc:
            self.note(f"CPU sampling skipped for tests that hold the timer signal: {exc}")
            # CPU budgets say so, never pass
            profile.extra[extra_keys.CPU_SAMPLING_SKIPPED] = str(exc)
            sampling = None
        if sampling is not None:
            if sampler.fallback_reason:
                self.note(f"CPU sampling: {sampler.fallback_reason}")
            self._current = profile
        # Both stay in from the first test to close(): between tests they pass calls through.
        self._patches.apply()
        if sampling is not None and self._guard is not None:
            self._guard.apply()
        return RunningTest(profile, sampling, started, perf_counter())

    def stop_test(self, running: RunningTest) -> None:
        profile = running.profile
        profile.elapsed_s += perf_counter() - running.began
        # Every step runs even when one before it fails: a collector left running would leave
        # the shim armed for the rest of the session. The test's own outcome stands.
        try:
            self._patches.pause()
        except Exception as exc:
            self.note(f"the blocking-call patches failed to stop: {exc!r}")
        if running.sampler is not None:
            try:
                running.sampler.stop()
            except Exception as exc:
                self.note(f"CPU sampler failed to stop: {exc!r}")
        for collector in reversed(running.collectors):
            try:
                collector.stop_test(profile)
            except Exception as exc:
                self.note(f"{type(collector).__name__} failed to stop: {exc!r}")
        self._current = None


class RunningTest(NamedTuple):
    """A test between Profiler.start_test and stop_test."""

    profile: TestProfile
    sampler: CpuSampler | None  # None: CPU sampling skipped (the test holds its signal)
    collectors: list[Collector]  # those that started
    began: float  # perf_counter()
