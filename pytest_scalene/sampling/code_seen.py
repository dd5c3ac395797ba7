"""Which Python code objects ran between two points in time, in any thread: the recorder under
the code map (issue 24), cheap enough to run around every profiled test.

Python 3.12+: sys.monitoring's PY_START and PY_RESUME events (and PY_THROW: a generator resumed
by throw(), as contextlib does on an exception). Each callback adds the code to a set and
returns DISABLE, so a code object costs one event per test whatever its number of calls; start()
re-arms the disabled events with restart_events(). Python 3.10 and 3.11: a PEP 523
frame-evaluation hook in the extension (native/code_seen.c), installed from start() to stop().
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
    """Records the code objects run between start() and stop(); one per process is enough.

    `problem`: why nothing can be recorded in this process (None: it can). Set in __init__;
    start() sets it too when the means of recording was taken since (another frame-evaluation
    function installed on 3.10/3.11), and stop() when the record was cut short. While it is set,
    start() does nothing and stop() returns [].
    """

    def __init__(self) -> None:
        self.problem: str | None = None
        self._seen: set[types.CodeType] = set()
        self._tool: int | None = None
        self._native: Any = None
        if sys.version_info >= (3, 12):
            self._claim_tool_id()
        else:
            self._load_hook()

    def _claim_tool_id(self) -> None:
        monitoring = sys.monitoring
        for tool in _TOOL_IDS:
            if monitoring.get_tool(tool) is not None:
                continue
            try:
                monitoring.use_tool_id(tool, _TOOL_NAME)
            except ValueError:  # claimed by another thread since get_tool
                continue
            self._tool = tool
            events = monitoring.events
            on_code = _recorder(self._seen.add, monitoring.DISABLE)
            monitoring.register_callback(tool, events.PY_START, on_code)
            monitoring.register_callback(tool, events.PY_RESUME, on_code)
            # PY_THROW (code, offset, exception) may not return DISABLE: not a local event.
            seen_add = self._seen.add
            monitoring.register_callback(
                tool, events.PY_THROW, lambda code, offset, exc: seen_add(code)
            )
            return
        taken = ", ".join(f"{t}: {monitoring.get_tool(t)}" for t in _TOOL_IDS)
        self.problem = f"no free sys.monitoring tool id for the code map's recorder ({taken})"

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
        self._seen.clear()
        if self._tool is not None:
            monitoring = sys.monitoring
            events = monitoring.events
            monitoring.set_events(self._tool, events.PY_START | events.PY_RESUME | events.PY_THROW)
            # restart_events is global: it also re-arms the events other tools (coverage.py)
            # disabled, which then fire once more each; they cost time, never a wrong result.
            monitoring.restart_events()
        else:
            self._native.code_seen_start()
            self.problem = self._native.code_seen_problem()  # set when it could not install

    def stop(self) -> list[types.CodeType]:
        """Stop; every code object that started or resumed running since start(), each once."""
        if self.problem is not None:
            return []
        if self._tool is not None:
            sys.monitoring.set_events(self._tool, 0)
            seen = list(self._seen)
            self._seen.clear()  # no reference kept between tests
            return seen
        try:
            return self._native.code_seen_stop()
        except (RuntimeError, MemoryError) as exc:  # hook replaced, or no memory: incomplete
            self.problem = str(exc)
            return []


def _recorder(
    seen_add: Callable[[types.CodeType], None], disable: object
) -> Callable[[types.CodeType, int], object]:
    def on_code(code: types.CodeType, offset: int) -> object:
        seen_add(code)
        return disable

    return on_code
