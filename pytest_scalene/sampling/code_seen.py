"""Which Python code objects ran between two points in time, in any thread: the recorder under
the code map (issue 24), cheap enough to run around every profiled test.

Python 3.12+: sys.monitoring's PY_START and PY_RESUME events (and PY_THROW: a generator resumed
by throw(), as contextlib does on an exception). Each callback adds the code to a set and
returns DISABLE, so a code object costs one event per test whatever its number of calls; the
events stay on between recordings. Re-arming them at each start() is what costs: either all of
them (restart_events(): every code object that runs again is re-instrumented, ~2 us each, ~400
in a millisecond test, mostly pytest's), or, for a recorder given `follow` (the code map's: the
project's own code), only the followed code that fired since, on a second tool's local events;
the rest then fires once per process, and take_outside() hands out what first ran between
recordings. The callback is the extension's builtin (native/code_seen.c), or a Python function
where that is not available (the extension not built, a free-threaded build: everything is
re-armed there).
Python 3.10 and 3.11: a PEP 523 frame-evaluation hook in the extension (native/code_seen.c),
installed from start() to stop().
Either way the extension's set is the process's one: recordings that nest share it (see
_native_users).
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

    def __init__(self, follow: Callable[[types.CodeType], bool] | None = None) -> None:
        self.problem: str | None = None
        # Which code must be seen in every recording that runs it (3.12+ with the extension):
        # the rest is then seen only where it first runs in the process (take_outside() hands
        # out what first ran between recordings). None: every code object, every time.
        self.follow = follow
        self._outside: list[types.CodeType] = []
        self._seen: set[types.CodeType] = set()
        self._native: Any = None
        if sys.version_info >= (3, 12):
            self.problem = _monitoring.claim()
            self._native = _monitoring.native
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
        # Nested: the extension's set is shared; hand what it saw to the recordings in progress.
        if _native_users and self._drain_native() is None:
            return
        if self in _native_users:  # started twice
            _native_users.remove(self)
        self._seen.clear()
        self._native.code_seen_start()
        self.problem = self._native.code_seen_problem()  # set when it could not install
        if self.problem is None:
            _native_users.append(self)
            if sys.version_info >= (3, 12):
                if self.first_runs_only:
                    self._outside += self._take_outside()  # followed before the re-arm
                _monitoring.rearm(complete=not self.first_runs_only)

    @property
    def first_runs_only(self) -> bool:
        """Whether code `follow` rejects is seen only where it first runs in the process."""
        return self.follow is not None and _monitoring.local_tool is not None

    def take_outside(self) -> list[types.CodeType]:
        """When first_runs_only: the code that first ran (or, followed, ran) between
        recordings since the last call; call it between tests, so that what runs there is
        followed, and not kept alive, until the next recording. Else []."""
        if not self.first_runs_only or self.problem is not None:
            return []
        found = [*self._outside, *self._take_outside()]
        self._outside = []
        return found

    def _take_outside(self) -> list[types.CodeType]:
        found = self._native.code_seen_take_outside()
        self._followed(found)
        return found

    def _followed(self, codes: list[types.CodeType]) -> None:
        """Code that fired: the followed ones are re-armed at the next start; the rest the
        caller wants followed starts firing in every recording."""
        if self.follow is None:
            return
        followed = _monitoring.followed
        _monitoring.fired.update((id(c), c) for c in codes if id(c) in followed)
        for code in codes:
            if id(code) not in followed and self.follow(code):
                _monitoring.follow(code)

    def stop(self) -> list[types.CodeType]:
        """Stop; every code object that started or resumed running since start(), each once."""
        if self.problem is not None:
            return []
        if self._native is None:
            _monitoring.stop(self._seen)
        elif self in _native_users:
            drained = self._drain_native()
            if drained is None:
                return []
            _native_users.remove(self)
            if _native_users:  # an outer recording goes on
                self._native.code_seen_start()
            if self.first_runs_only:
                self._followed(drained)
            if not self._seen:  # the common case: no recording nested in this one
                return drained
            self._seen.update(drained)
        seen = list(self._seen)
        self._seen.clear()  # no reference kept between tests
        return seen

    def _drain_native(self) -> list[types.CodeType] | None:
        """Stop the extension's recording; what it saw, added to every other recording in
        progress (None: the record is incomplete, and every recording in progress has a
        problem)."""
        try:
            drained = self._native.code_seen_stop()
        except (RuntimeError, MemoryError) as exc:  # hook replaced, or no memory: incomplete
            for recorder in _native_users:
                recorder.problem = str(exc)
            _native_users.clear()
            return None
        for recorder in _native_users:
            if recorder is not self:
                recorder._seen.update(drained)
        return drained


_native_users: list[CodeSeen] = []  # the recordings in progress the extension's set serves


class _Monitoring:
    """The process's one sys.monitoring tool (3.12+), shared by every CodeSeen.

    Its events stay armed from the first start() on: turning them off at stop() would make
    every code object that runs next be re-instrumented twice per test (set_events changes the
    global event set), 3 ms a test for 400 code objects of 40 lines; armed, the code that runs
    between tests costs one callback the first time it runs after a start()."""

    def __init__(self) -> None:
        self.tool: int | None = None
        self.problem: str | None = None
        self.native: Any = None  # the extension, when its callback is the one registered
        self.armed = False
        # 3.12+ with the extension's callback, where a second tool id is free: followed code
        # (the project's) fires on this tool's local events, re-armed at each start only on
        # the code that fired since; everything else fires once per process on the global
        # events (restart_events, the other way, re-instruments every code object that runs
        # again: 2 us each, ~400 a millisecond test, mostly pytest's).
        self.local_tool: int | None = None
        self.followed: dict[int, types.CodeType] = {}  # id -> code, kept: ids stay theirs
        self.fired: dict[int, types.CodeType] = {}  # followed code disabled since the re-arm
        self.keeping_outside = False
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
            native = _native_callback()
            if native is not None:
                self.native, on_code = native
                on_throw = on_code  # it tells PY_THROW (three arguments) from the others
            else:
                on_code, on_throw = _callbacks(self, monitoring.DISABLE)
            monitoring.register_callback(tool, events.PY_START, on_code)
            monitoring.register_callback(tool, events.PY_RESUME, on_code)
            monitoring.register_callback(tool, events.PY_THROW, on_throw)
            if native is not None:
                self.local_tool = _claim_another(tool, on_code)
            return None
        taken = ", ".join(f"{t}: {monitoring.get_tool(t)}" for t in _TOOL_IDS)
        self.problem = f"no free sys.monitoring tool id for the code map's recorder ({taken})"
        return self.problem

    def start(self, seen: set[types.CodeType]) -> None:
        """A recording with the Python callbacks begins."""
        if not any(s is seen for s in self.recording):
            self.recording = (*self.recording, seen)
        self.rearm()

    def rearm(self, complete: bool = True) -> None:
        """Every code object fires once more from now on (complete), or only the followed
        ones (the events armed at the first call)."""
        monitoring = sys.monitoring
        if not self.armed:
            events = monitoring.events
            monitoring.set_events(self.tool, events.PY_START | events.PY_RESUME | events.PY_THROW)
            self.armed = True
        if complete:
            # Re-arms what the callbacks disabled, so that each code fires once in this
            # recording. It is global: it also re-arms the events other tools (coverage.py)
            # disabled, which then fire once more each; that costs them time, never a wrong
            # result.
            monitoring.restart_events()
            self.fired.clear()
            return
        if not self.keeping_outside:  # what first runs between recordings: take_outside()
            self.native.code_seen_keep_outside(True)
            self.keeping_outside = True
        local = monitoring.events.PY_START | monitoring.events.PY_RESUME
        for code in self.fired.values():  # off and on again: its disabled events fire again
            monitoring.set_local_events(self.local_tool, code, 0)
            monitoring.set_local_events(self.local_tool, code, local)
        self.fired.clear()

    def follow(self, code: types.CodeType) -> None:
        """`code` fires in every recording that runs it from now on."""
        self.followed[id(code)] = code
        events = sys.monitoring.events
        sys.monitoring.set_local_events(self.local_tool, code, events.PY_START | events.PY_RESUME)

    def stop(self, seen: set[types.CodeType]) -> None:
        self.recording = tuple(s for s in self.recording if s is not seen)


_monitoring = _Monitoring()


def _claim_another(taken: int, callback: Callable[..., object]) -> int | None:
    """A second tool id for the followed code's local events; None when none is free (every
    code object then fires again in each recording)."""
    monitoring = sys.monitoring
    for tool in _TOOL_IDS:
        if tool == taken or monitoring.get_tool(tool) is not None:
            continue
        try:
            monitoring.use_tool_id(tool, _TOOL_NAME + " (followed code)")
        except ValueError:
            continue
        monitoring.register_callback(tool, monitoring.events.PY_START, callback)
        monitoring.register_callback(tool, monitoring.events.PY_RESUME, callback)
        return tool
    return None


def _native_callback() -> tuple[Any, Callable[..., object]] | None:
    """The extension and its sys.monitoring callback; None where it has none (not built, or a
    free-threaded build), and the Python callbacks record instead."""
    try:
        from .. import _native
    except ImportError:
        return None
    make = getattr(_native, "code_seen_callback", None)  # an extension built before it had one
    callback = make() if make is not None else None
    return None if callback is None else (_native, callback)


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
