"""Which Python code objects ran between two points in time, in any thread: the recorder under
the code map (issue 24), cheap enough to run around every profiled test.

Python 3.12+: sys.monitoring's PY_START and PY_RESUME events (and PY_THROW: a generator resumed
by throw(), as contextlib does on an exception). Each callback adds the code to a set and
returns DISABLE, so a code object costs one event per test whatever its number of calls; start()
re-arms the disabled events with restart_events(); the events stay on between recordings.
Python 3.10 and 3.11: a PEP 523 frame-evaluation hook in the extension (native/code_seen.c),
installed from start() to stop().
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any

# Tool ids tried in this order. Not DEBUGGER_ID (0) nor COVERAGE_ID (1): a debugger or
# coverage.py may claim theirs later in the session, and would fail if we held it. PROFILER_ID
# (2) is last: cProfile (3.12+) claims it when enabled and raises if it is taken, so a test
# that uses cProfile would fail while we held it. 3 and 4 are not assigned to any tool.
_TOOL_IDS = (3, 4, 5, 2)
_TOOL_NAME = "pytest-scalene code map"


class CodeSeen:
    """Records the code objects run between start() and stop(); one per process is enough, and
    recordings may nest (a pytester session run inline inside a profiled test).

    `problem`: why nothing can be recorded in this process (None: it can). Set in __init__;
    start() sets it too when the means of recording was taken since (another frame-evaluation
    function installed on 3.10/3.11), and stop() when the record was cut short. While it is set,
    start() does nothing and stop() returns [].
    """

    def __init__(self) -> None:
        self.problem: str | None = None
        self._seen: set[types.CodeType] = set()
        self._native: Any = None
        if sys.version_info >= (3, 12):
            self.problem = _monitoring.claim()
        else:
            self._load_hook()

    def _load_hook(self) -> None:
        try:
            from .. import _native
        except ImportError as exc:
            self.problem = f"the extension module _native is not built ({exc})"
            return
        self._native = _native
        self.problem = _native.code_seen_problem()

    def start(self) -> None:
        """Begin recording (forgetting what was seen); a no-op when `problem` is set."""
        if self.problem is not None:
            return
        if self._native is None:
            self._seen.clear()
            _monitoring.start(self._seen)
            return
        # Nested: the hook's set is shared; hand what it saw to the recordings in progress.
        if _hook_users and self._drain_hook() is None:
            return
        if self in _hook_users:  # started twice
            _hook_users.remove(self)
        self._seen.clear()
        self._native.code_seen_start()
        self.problem = self._native.code_seen_problem()  # set when it could not install
        if self.problem is None:
            _hook_users.append(self)

    def stop(self) -> list[types.CodeType]:
        """Stop; every code object that started or resumed running since start(), each once."""
        if self.problem is not None:
            return []
        if self._native is None:
            _monitoring.stop(self._seen)
        elif self in _hook_users:
            drained = self._drain_hook()
            if drained is None:
                return []
            _hook_users.remove(self)
            if _hook_users:  # an outer recording goes on
                self._native.code_seen_start()
            if not self._seen:  # the common case: no recording nested in this one
                return drained
            self._seen.update(drained)
        seen = list(self._seen)
        self._seen.clear()  # no reference kept between tests
        return seen

    def _drain_hook(self) -> list[types.CodeType] | None:
        """Stop the hook; what it saw, added to every other recording in progress (None: the
        record is incomplete, and every recording in progress has a problem)."""
        try:
            drained = self._native.code_seen_stop()
        except (RuntimeError, MemoryError) as exc:  # hook replaced, or no memory: incomplete
            for recorder in _hook_users:
                recorder.problem = str(exc)
            _hook_users.clear()
            return None
        for recorder in _hook_users:
            if recorder is not self:
                recorder._seen.update(drained)
        return drained


_hook_users: list[CodeSeen] = []  # the recordings in progress that the C hook serves


class _Monitoring:
    """The process's one sys.monitoring tool (3.12+), shared by every CodeSeen.

    Its events stay armed from the first start() on: turning them off at stop() would make
    every code object that runs next be re-instrumented twice per test (set_events changes the
    global event set), 3 ms a test for 400 code objects of 40 lines; armed, the code that runs
    between tests costs one callback the first time it runs after a start()."""

    def __init__(self) -> None:
        self.tool: int | None = None
        self.problem: str | None = None
        self.armed = False
        # The sets of the recordings in progress: a tuple, replaced whole, so that a callback
        # in another thread never sees it change under it.
        self.recording: tuple[set[types.CodeType], ...] = ()

    def claim(self) -> str | None:
        if self.tool is not None or self.problem is not None:
            return self.problem
        monitoring = sys.monitoring
        for tool in _TOOL_IDS:
            if monitoring.get_tool(tool) is not None:
                continue
            try:
                monitoring.use_tool_id(tool, _TOOL_NAME)
            except ValueError:  # claimed by another thread since get_tool
                continue
            self.tool = tool
            events = monitoring.events
            on_code, on_throw = _callbacks(self, monitoring.DISABLE)
            monitoring.register_callback(tool, events.PY_START, on_code)
            monitoring.register_callback(tool, events.PY_RESUME, on_code)
            monitoring.register_callback(tool, events.PY_THROW, on_throw)
            return None
        taken = ", ".join(f"{t}: {monitoring.get_tool(t)}" for t in _TOOL_IDS)
        self.problem = f"no free sys.monitoring tool id for the code map's recorder ({taken})"
        return self.problem

    def start(self, seen: set[types.CodeType]) -> None:
        monitoring = sys.monitoring
        if not self.armed:
            events = monitoring.events
            monitoring.set_events(self.tool, events.PY_START | events.PY_RESUME | events.PY_THROW)
            self.armed = True
        if not any(s is seen for s in self.recording):
            self.recording = (*self.recording, seen)
        # Re-arms what the callbacks disabled, so that each code fires once in this recording.
        # It is global: it also re-arms the events other tools (coverage.py) disabled, which
        # then fire once more each; that costs them time, never a wrong result.
        monitoring.restart_events()

    def stop(self, seen: set[types.CodeType]) -> None:
        self.recording = tuple(s for s in self.recording if s is not seen)


_monitoring = _Monitoring()


def _callbacks(
    state: _Monitoring, disable: object
) -> tuple[Callable[[types.CodeType, int], object], Callable[..., None]]:
    def on_code(code: types.CodeType, offset: int) -> object:
        for seen in state.recording:
            seen.add(code)
        return disable  # this code fires again only after the next restart_events()

    def on_throw(code: types.CodeType, offset: int, exception: BaseException) -> None:
        for seen in state.recording:  # PY_THROW may not return DISABLE (not a local event)
            seen.add(code)

    return on_code, on_throw
