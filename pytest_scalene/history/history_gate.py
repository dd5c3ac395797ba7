"""The history in a pytest session, as plain methods the session's hooks call: record each
run at the end of the session (on the xdist controller only, in one transaction), and with
--profile-compare-history judge each test against its recent runs on this machine (a judge of
gates/pipeline.py, the last one).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from ..config.history_options import HistoryOptions
from ..core import extra_keys, runenv
from ..core.model import TestProfile
from ..core.verdict import Verdict
from ..gates import cpu_resolution
from ..gates.comparison import CPU_TIMED, NoiseRule
from ..gates.machine_speed import RecentProbe, slower_by
from ..gates.pipeline import Unjudged
from ..sampling.profiler import Profiler
from . import run_records
from .connect import open_store
from .recent_runs import judge, machine_then
from .schema import options_key
from .store import HistoryError, describe

NOT_RECORDED = (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR)


def figure_options(config: pytest.Config, profiler: Profiler) -> dict[str, Any]:
    """The options that change the figures: runs are compared only when these are equal."""
    opts = profiler.options
    return {
        "interval_s": opts.interval_s,
        "clock": opts.clock,
        "memory": opts.memory,
        "memory_threshold": opts.memory_threshold,
        "subprocesses": opts.subprocesses,
        "include": sorted(opts.include),
        "exclude": sorted(opts.exclude),
        "repeat": str(config.getoption("--profile-repeat")),
    }


UNJUDGED = Unjudged("the history (--profile-compare-history)")
HISTORY_TIMES = "the history's CPU times (--profile-compare-history)"


class History:
    def __init__(self, config: pytest.Config, profiler: Profiler, options: HistoryOptions) -> None:
        self.config = config
        self.profiler = profiler
        self.options = options
        self.started_at = time.time()
        self.recent: dict[str, list[dict[str, Any]]] = {}
        self.summary: list[str] = []
        self.worker = runenv.is_xdist_worker(config)
        self.machine = run_records.fingerprint(run_records.machine_info())
        self.speed = RecentProbe()  # beside each recorded test (gates/machine_speed.py)

    def start(self) -> None:
        """Open the store now: a bad URL or a foreign database stops the run before any test."""
        if self.worker and not self.options.compare:
            return  # the controller checked it and alone records
        try:
            with open_store(self.options.url) as store:
                if not self.worker:
                    store.ensure_schema()
                if self.options.compare:
                    key = options_key(figure_options(self.config, self.profiler))
                    self.recent = store.recent(self.machine, key, self.options.window)
        except HistoryError as exc:
            raise pytest.UsageError(f"--profile-history: {exc}") from None

    # -- judging -------------------------------------------------------------------------------
    def _verdicts(self, nodeid: str, excuse: bool) -> tuple[list[Any], list[str]]:
        """`excuse`: a CPU growth the machine's slowdown explains is not judged (the verdicts);
        without it such a growth stays a suspect (the confirmation, which waits for the
        machine)."""
        profile = self.profiler.session.tests[nodeid]
        options = self.profiler.options
        rule = NoiseRule.for_run(None, options.interval_s, options.memory_threshold)
        current = run_records.test_record(profile).metrics
        now = profile.extra.get(extra_keys.MACHINE_S) if excuse else None
        return judge(current, self.recent.get(nodeid, []), rule, now)

    @property
    def confirms_cpu(self) -> bool:
        return self.options.compare

    every_test = True  # every passed test gets the machine's speed for its record

    def unjudged(self, profile: TestProfile) -> Unjudged | None:
        """A test the history had no judgement of (its notes say why), or whose CPU its times
        could not gate."""
        found = profile.extra.get(extra_keys.HISTORY)
        if isinstance(found, dict) and found.get("notes"):
            return UNJUDGED
        return cpu_resolution.unjudged(
            profile, extra_keys.HISTORY, HISTORY_TIMES, self.options.allow_ungated_cpu
        )

    def cpu_suspect(self, item: pytest.Item, profile: TestProfile) -> str | None:
        """A CPU regression against the history is confirmed as one against a baseline is
        (gates/pipeline.py): it must survive more runs after pauses."""
        found, _ = self._verdicts(item.nodeid, excuse=False)
        return next((v.message for v in found if v.metric in CPU_TIMED and not v.passed), None)

    def waits_for_machine(self, item: pytest.Item, profile: TestProfile) -> bool:
        then = machine_then(self.recent.get(item.nodeid, []))
        return slower_by(then, profile.extra.get(extra_keys.MACHINE_S)) > 1.0

    def verdicts(self, item: pytest.Item, profile: TestProfile) -> list[Verdict]:
        """--profile-compare-history's verdicts; how it judged goes under extra["history"].
        Every passed test gets the machine's speed for its record (a confirmation's, timed
        beside its runs, or the recent reading)."""
        if extra_keys.MACHINE_S not in profile.extra:
            profile.extra[extra_keys.MACHINE_S] = self.speed.reading()
        if not self.options.compare:
            return []
        found, notes = self._verdicts(item.nodeid, excuse=True)
        verdicts = [v.verdict() for v in found]
        profile.extra[extra_keys.HISTORY] = {
            "runs": max((v.runs for v in found), default=len(self.recent.get(item.nodeid, []))),
            "machine": self.machine,
            "notes": notes,
            **cpu_resolution.of_verdicts(verdicts),  # could it gate this test's CPU?
        }
        return verdicts

    # -- recording -----------------------------------------------------------------------------
    def record(self, session: pytest.Session, code_map: str | None = None) -> None:
        if self.worker or not self.profiler.session.tests:
            return
        if session.exitstatus in NOT_RECORDED:
            self.summary.append(f"history: run not recorded (exit status {session.exitstatus!r})")
            return
        options = figure_options(self.config, self.profiler)
        run = run_records.run_record(
            self.profiler.session, str(self.config.rootpath), options, self.started_at, code_map
        )
        try:
            with open_store(self.options.url) as store:
                run_id = store.record(run)
        except HistoryError as exc:
            self.summary.append(f"ERROR --profile-history: run not recorded: {exc}")
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
            return
        commit = (run.commit or "no commit")[:10] + (" (dirty)" if run.dirty else "")
        self.summary.append(
            f"history: run {run_id} recorded in {describe(self.options.url or '')}: "
            f"{len(run.tests)} tests, {commit}, machine {run.machine}"
        )

    def write_summary(self, terminalreporter: Any) -> None:
        lines = list(self.summary)
        tests = self.profiler.session.tests.values()
        blind = cpu_resolution.session_note(tests, extra_keys.HISTORY, "the history")
        if blind is not None:
            lines.append(blind)
        for nodeid, profile in self.profiler.session.tests.items():
            history = profile.extra.get(extra_keys.HISTORY)
            if isinstance(history, dict):
                lines += [f"{nodeid}: {note}" for note in history.get("notes", [])]
        if lines:
            terminalreporter.write_sep("-", "pytest-scalene history")
            for line in lines:
                terminalreporter.write_line(line, red=line.startswith("ERROR"))
