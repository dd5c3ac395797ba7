"""The pytest side of instruction counting: which tests need counts, one counting session for
them after collection (runner.py), and the counts put on each test's profile, where budgets
and baselines judge them (gates.METRICS "instructions").

A test needs counts under `--profile-measure=instructions` when it is profiled, and always when
one of its perf_budget marks sets `instructions=`, so that such a budget works in plain pytest.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from ..core.model import TestProfile
from ..gates.budgets import MARKER
from ..sampling.profiler import Profiler
from . import runner

COUNT_KEY = "instructions"  # profile.extra: the test's count (gates.METRICS)
FUNCTIONS_KEY = "instructions_functions"  # profile.extra: inclusive count per Python function
ENVIRONMENT_KEY = "instructions_environment"  # profile.extra: what the counts depend on
MISSING_KEY = "instructions_missing"  # profile.extra: why a test that needs counts has none


def sets_instruction_budget(item: pytest.Item) -> bool:
    return any("instructions" in mark.kwargs for mark in item.iter_markers(MARKER))


class InstructionCounts:
    def __init__(self, config: pytest.Config, profiler: Profiler, measure: str) -> None:
        self.config = config
        self.profiler = profiler
        self.measure = measure
        self.counts: dict[str, runner.Counted | str] = {}

    def needs_counts(self, item: pytest.Item) -> bool:
        if sets_instruction_budget(item):
            return True
        return self.measure == "instructions" and self.profiler.wants(item)

    def after_collection(self, session: pytest.Session) -> None:
        """Called by plugin.py's pytest_collection_finish (trylast: after deselection)."""
        if self.config.option.collectonly:
            return
        nodeids = [item.nodeid for item in session.items if self.needs_counts(item)]
        if not nodeids:
            return
        problem = runner.problem()
        if problem is not None:
            self.counts = dict.fromkeys(nodeids, problem)
            return
        reporter: Any = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.ensure_newline()
            reporter.write_line(
                f"pytest-scalene: counting the instructions of {len(nodeids)} test(s) under "
                "valgrind (callgrind), in a child session..."
            )
        started = time.perf_counter()
        scope = self.profiler.scope
        self.counts, output = runner.count(
            nodeids,
            Path(self.config.rootpath),
            self.config.inipath,
            self.config.invocation_params.args,
            extra=self._child_options(),
            cwd=Path(self.config.invocation_params.dir),
            relative_name=scope.relative_name,
        )
        counted = sum(isinstance(c, runner.Counted) for c in self.counts.values())
        if reporter is not None:
            reporter.write_line(
                f"pytest-scalene: {counted} of {len(nodeids)} test(s) counted in "
                f"{time.perf_counter() - started:.1f} s"
            )
            if counted == 0 and output.strip():
                reporter.write_line("the counting session's last lines:\n" + output[-3000:])

    def _child_options(self) -> list[str]:
        """Plugins that would break the counting session: xdist workers would run outside
        valgrind, and a timeout sized for native speed would fire."""
        extra = []
        manager = self.config.pluginmanager
        if manager.has_plugin("xdist"):
            extra += ["-n", "0"]
        if manager.has_plugin("timeout"):
            extra += ["--timeout=0"]
        return extra

    def attach(self, item: pytest.Item, call: pytest.CallInfo[None]) -> None:
        """Called by plugin.py's pytest_runtest_makereport, before the gates judge."""
        if call.when != "call" or item.nodeid not in self.counts:
            return
        profile = self.profiler.session.tests.get(item.nodeid)
        if profile is not None:
            attach(profile, self.counts[item.nodeid])


def attach(profile: TestProfile, counted: runner.Counted | str) -> None:
    if isinstance(counted, str):
        profile.extra[MISSING_KEY] = counted
        return
    profile.extra[COUNT_KEY] = counted.instructions
    profile.extra[FUNCTIONS_KEY] = dict(sorted(counted.functions.items()))
    profile.extra[ENVIRONMENT_KEY] = dict(counted.fingerprint)
