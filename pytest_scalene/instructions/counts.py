"""The pytest side of instruction counting: which tests need counts, one counting session for
them after collection (runner.py), and the counts put on each test's profile, where budgets
and baselines judge them (gates.METRICS "instructions").

A test needs counts under `--profile-measure=instructions` when it is profiled, and always when
one of its perf_budget marks sets `instructions=`, so that such a budget works in plain pytest.

Under pytest-xdist every worker collects every test; the first worker to get there counts them
all, once, and leaves the counts in a folder the controller made for the run, where the other
workers read them (N workers would otherwise each run the whole valgrind session).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..core import extra_keys
from ..core.model import TestProfile, counted_calls
from ..core.runenv import marked
from ..gates.budgets import MARKER
from ..sampling.profiler import Profiler

# Imported where counts are made: runner.py (valgrind, the child session) and the stored
# baselines' comparison, which most sessions never use.
if TYPE_CHECKING:
    from ..gates.baseline_judge import StoredBaselines
    from ..gates.baseline_store import TestEntry
    from ..gates.comparison import NoiseRule
    from . import runner

SHARED_DIR_KEY = "pytest_scalene_counts_dir"  # xdist workerinput: where the workers share counts
SHARED_FILE = "counts.json"
# A test runs 40-120x slower under callgrind (docs/baselines.md, "Cost"): a user's pytest-timeout
# limit is multiplied by this in the counting session.
CALLGRIND_SLOWDOWN = 200


def sets_instruction_budget(item: pytest.Item) -> bool:
    """`item`: one with a perf_budget marker (runenv.marked)."""
    return any("instructions" in mark.kwargs for mark in item.iter_markers(MARKER))


class InstructionCounts:
    def __init__(self, config: pytest.Config, profiler: Profiler, measure: str) -> None:
        self.config = config
        self.profiler = profiler
        self.measure = measure
        self.counts: dict[str, runner.Counted | str] = {}
        self._shared_dir: str | None = None  # xdist controller: see share_with_worker

    def after_collection(
        self, session: pytest.Session, baselines: StoredBaselines | None = None
    ) -> None:
        """Called by profiling_session.after_collection (trylast: after deselection).
        `baselines`: the tests whose counts would fail against them are counted again
        (see confirm)."""
        if self.config.option.collectonly:
            return
        budgeted = {id(i) for i in marked(session.items) if sets_instruction_budget(i)}
        counted = self.measure == "instructions"
        nodeids = [
            item.nodeid
            for item in session.items
            if id(item) in budgeted or (counted and self.profiler.wants(item))
        ]
        if not nodeids:
            return
        from . import runner

        problem = runner.problem()
        if problem is not None:
            self.counts = dict.fromkeys(nodeids, problem)
            return
        calls = baselines.counted_calls(nodeids) if baselines is not None else {}
        shared = getattr(self.config, "workerinput", {}).get(SHARED_DIR_KEY)
        if shared is None:
            self._count(nodeids, calls=calls)
            if baselines is not None:
                self.confirm(baselines)
            return
        from ..core.atomic_write import locked, write_text_atomic  # counting sessions only

        with locked(shared):  # one worker counts; the others wait, then read its counts
            path = Path(shared) / SHARED_FILE
            if path.exists():
                counts = _decode(json.loads(path.read_text(encoding="utf-8")))
                missing = "the counting session did not run it"
                self.counts = {n: counts.get(n, missing) for n in nodeids}
            else:
                self._count(nodeids, calls=calls)
                write_text_atomic(path, json.dumps(_encode(self.counts)))

    def share_with_worker(self, node: Any) -> None:
        """Called by the session's pytest_configure_node (xdist, on the controller): the
        folder where the workers share the counts."""
        if self._shared_dir is None:
            self._shared_dir = tempfile.mkdtemp(prefix="pytest-scalene-counts-")
            self.config.add_cleanup(lambda: shutil.rmtree(self._shared_dir, ignore_errors=True))
        node.workerinput[SHARED_DIR_KEY] = self._shared_dir

    def _count(
        self, nodeids: list[str], why: str = "", calls: dict[str, int] | None = None
    ) -> None:
        reporter: Any = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.ensure_newline()
            reporter.write_line(
                f"pytest-scalene: counting the instructions of {len(nodeids)} test(s) "
                f"{why + ' ' if why else ''}under valgrind (callgrind), in a child session..."
            )
        from . import runner

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
            calls=calls,
        )
        counted = sum(isinstance(c, runner.Counted) for c in self.counts.values())
        if reporter is not None:
            reporter.write_line(
                f"pytest-scalene: {counted} of {len(nodeids)} test(s) counted in "
                f"{time.perf_counter() - started:.1f} s"
            )
            if counted == 0 and output.strip():
                reporter.write_line("the counting session's last lines:\n" + output[-3000:])

    def confirm(self, baselines: StoredBaselines) -> None:
        """When a test's count moved from the baseline (either way), count the session once more:
        a test whose count moves between two sessions by what the gate would call a regression
        depends on timing (threads polling a lock, an event loop, sleeps): on filelock's own
        suite such tests read -27% to +37% on unchanged code. Its count is not judged, with a
        note that says why, in every run; a count that repeats is judged.

        The second session runs the first one's tests, in its order, not only the suspects: a
        test's count includes what the tests before it left warm or cold (a cache, a compiled
        pattern), so a suspect counted alone reads otherwise for reasons that are not timing (a
        slowed test behind a cache another test fills read 27 M, then 193 M alone)."""
        from . import runner

        suspects = [
            nodeid
            for nodeid, counted in self.counts.items()
            if isinstance(counted, runner.Counted)
            and baselines.counted_moved(nodeid, entry_of(counted))
        ]
        if not suspects:
            return
        everything = dict(self.counts)
        calls = {n: c for n, counted in everything.items() if (c := _calls_of(counted)) is not None}
        self._count(list(everything), "again, to confirm", calls)  # sets self.counts anew
        again, self.counts = self.counts, everything
        for nodeid in suspects:
            counted, second = everything[nodeid], again.get(nodeid)
            if not isinstance(second, runner.Counted) or not isinstance(counted, runner.Counted):
                continue
            if moved(counted, second, baselines.counts_rule()):
                self.counts[nodeid] = (
                    f"its instruction count moved between two counting sessions "
                    f"({counted.instructions:,} then {second.instructions:,}): it depends on "
                    "timing (threads, polling, an event loop, sleeps), so instructions cannot "
                    "judge it; judge it with --profile-compare-ref"
                )

    def _child_options(self) -> list[str]:
        """Plugins that would break the counting session: xdist workers would run outside
        valgrind, and a timeout sized for native speed would fire: it is scaled to callgrind's
        speed, so that a test that hangs still ends."""
        extra = []
        manager = self.config.pluginmanager
        if manager.has_plugin("xdist"):
            extra += ["-n", "0"]
        if manager.has_plugin("timeout"):
            seconds = float(self.config.getoption("timeout", None) or 0)
            extra += [f"--timeout={seconds * CALLGRIND_SLOWDOWN:g}"]
        return extra

    def attach(self, item: pytest.Item, call: pytest.CallInfo[None]) -> None:
        """Called by profiling_session.py's pytest_runtest_makereport, before the gates judge."""
        if call.when != "call" or not self.counts or item.nodeid not in self.counts:
            return  # (item.nodeid builds its string at each read)
        profile = self.profiler.session.tests.get(item.nodeid)
        if profile is not None:
            attach(profile, self.counts[item.nodeid])


def attach(profile: TestProfile, counted: runner.Counted | str) -> None:
    if isinstance(counted, str):
        profile.extra[extra_keys.INSTRUCTIONS_MISSING] = counted
        return
    profile.extra[extra_keys.INSTRUCTIONS] = counted.instructions
    profile.extra[extra_keys.INSTRUCTIONS_FUNCTIONS] = dict(sorted(counted.functions.items()))
    profile.extra[extra_keys.INSTRUCTIONS_ENVIRONMENT] = dict(counted.fingerprint)


def _calls_of(counted: runner.Counted | str) -> int | None:
    return None if isinstance(counted, str) else counted_calls(counted.fingerprint)


def entry_of(counted: runner.Counted) -> TestEntry:
    """A test's counts as the comparison reads them."""
    from ..gates.baseline_store import TestEntry

    metrics = {"instructions": float(counted.instructions)}
    return TestEntry(metrics, (), 0.0, dict(counted.functions), dict(counted.fingerprint))


def moved(first: runner.Counted, second: runner.Counted, rule: NoiseRule) -> bool:
    """The two counts of one test differ, either way, by what `rule` calls a regression."""
    from ..gates.baseline_judge import counts_moved

    return counts_moved(entry_of(first), entry_of(second), rule)


def _encode(counts: dict[str, runner.Counted | str]) -> dict[str, Any]:
    return {k: v if isinstance(v, str) else dataclasses.asdict(v) for k, v in counts.items()}


def _decode(data: dict[str, Any]) -> dict[str, runner.Counted | str]:
    from . import runner

    return {k: v if isinstance(v, str) else runner.Counted(**v) for k, v in data.items()}
