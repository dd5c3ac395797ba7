"""The gates of one session, as plain methods the session's hooks call: perf_budget markers
(read before the call, judged as a `Judge`), --profile-repeat and the confirmations after the
call, the stored baselines (loaded, judged by gates/baseline_judge.py, saved), and the figures as
JUnit properties. gates/pipeline.py turns the judges' verdicts into the report's outcome.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING

import pytest

from ..config.options import GateOptions
from ..core import extra_keys, runenv
from ..core.model import TestProfile
from ..core.outputs import Outputs
from ..core.verdict import Verdict
from ..sampling.profiler import Profiler
from . import cpu_resolution
from .baseline_judge import StoredBaselines, cold_first_call
from .budgets import (
    BUDGET_KEY,
    MARKER,
    NO_BUDGET,
    BudgetError,
    budget_of,
    check,
    parse_defaults,
    parse_marks,
)
from .machine_speed import note_probe
from .metrics import METRICS, Availability
from .pipeline import Judge, SlowMachine, Unjudged, confirm
from .repeat import first_run_recorded_outcome, rerun_of, run_again

if TYPE_CHECKING:
    from .baseline_store import TestEntry


class Budgets:
    """perf_budget markers, with --profile-budget's limits for every test whose markers do not
    set them."""

    confirms_cpu = False

    def __init__(self, gates: Gates) -> None:
        self.gates = gates

    @property
    def every_test(self) -> bool:
        return bool(self.gates.default_budget.limits)  # --profile-budget

    def verdicts(self, item: pytest.Item, profile: TestProfile) -> list[Verdict]:
        budget = budget_of(item).with_defaults(self.gates.default_budget)
        return check(budget, profile, self.gates.availability()) if budget.limits else []

    def cpu_suspect(self, item: pytest.Item, profile: TestProfile) -> str | None:
        return None

    def waits_for_machine(self, item: pytest.Item, profile: TestProfile) -> bool:
        return False

    @staticmethod  # it reads the profile alone
    def unjudged(profile: TestProfile) -> Unjudged | None:
        return None  # a budget's missing figure is a verdict of its own ("cannot be checked")


class Gates:
    def __init__(
        self, config: pytest.Config, profiler: Profiler, options: GateOptions, outputs: Outputs
    ) -> None:
        self.config = config
        self.profiler = profiler
        self.options = options
        self.outputs = outputs
        self.rootdir = str(config.rootpath)
        self.stored = StoredBaselines(profiler, options, self.rootdir)  # --profile-compare
        self.budgets = Budgets(self)
        self.default_budget = NO_BUDGET  # --profile-budget, read by check_session
        self.summary: list[str] = []  # lines for the terminal summary
        # Tests whose call phase runs: their subtests' reports (when == "call") are not judged.
        self.in_call: set[str] = set()
        # The figures go on the item as JUnit properties only when a JUnit file is written:
        # 10 properties a test cost 15 us of its profiled time, and every report copies them.
        self.junit = bool(getattr(config.option, "xmlpath", None))
        self.slow_machine = SlowMachine()  # the confirmations' memory of a slow machine

    # -- the session starts ----------------------------------------------------------------------
    def availability(self) -> Availability:
        options = self.profiler.options
        return Availability(
            memory=runenv.memory_unavailable(options.memory),
            gpu="--profile-gpu=no" if options.gpu == "no" else None,
        )

    def check_session(self) -> None:
        """Usage errors before any test runs; load the baselines to compare with."""
        opts = self.options
        try:
            self.default_budget = parse_defaults(opts.budget)
        except BudgetError as exc:
            raise pytest.UsageError(str(exc)) from None
        on_memory = [k for k in self.default_budget.limits if METRICS[k].source == "memory"]
        if on_memory and (why := self.availability().memory) is not None:
            raise pytest.UsageError(
                f"--profile-budget {on_memory[0]}=... needs memory profiling, which is off in "
                f"this run ({why}); without it this gate could never fail"
            )
        if opts.compare:
            self.stored.load()

    # -- each test -------------------------------------------------------------------------------
    def before_call(self, item: pytest.Item) -> None:
        """Read the test's perf_budget markers; a wrong one fails the test before it runs."""
        if not runenv.has_marker(item):
            return  # budget_of() reads no BUDGET_KEY as no budget
        marks = [(node.nodeid or node.name, m) for node, m in item.iter_markers_with_node(MARKER)]
        if not marks:
            return  # budget_of() reads no BUDGET_KEY as no budget
        try:
            item.stash[BUDGET_KEY] = parse_marks(marks)
            error = None
        except BudgetError as exc:
            error = str(exc)
        if error is not None:
            pytest.fail(error, pytrace=False)  # the test does not run: its marker is wrong

    @property
    def _probing(self) -> bool:
        """A saved CPU time keeps the machine's speed beside its runs (gates/machine_speed.py)."""
        return self.options.save_baseline and self.options.measure == "time"

    def reruns(self, judges: list[Judge]) -> bool:
        """Whether after_call may run a test again, whatever its profile: --profile-repeat, a
        judge's CPU confirmation, a saved CPU time's machine probe."""
        return self.options.repeat.more or self._probing or _confirming(judges)

    def after_call(self, item: pytest.Item, judges: list[Judge]) -> None:
        """The first run is profiled: --profile-repeat's runs, then the CPU confirmation of the
        `judges` that ask for one, then the leak confirmation."""
        nodeid = item.nodeid
        profile = self.profiler.session.tests.get(nodeid)
        if profile is None:
            return
        repeat = self.options.repeat
        more = repeat.more
        confirming = _confirming(judges)
        if (more or confirming) and first_run_recorded_outcome(item):
            return  # a unittest skip or failure: its outcome comes with the report
        probing = self._probing
        if probing:
            note_probe(profile)  # beside the first run, a candidate for the fastest
        if more:
            rerun = rerun_of(item)
            run_again(self.profiler, nodeid, repeat.runs - 1, rerun, repeat.seconds, probe=probing)
        if confirming:
            confirm(self.profiler, item, judges, repeat.runs, self.slow_machine)
        if more or confirming:  # the re-runs' profile
            profile = self.profiler.session.tests.get(nodeid)
        if profile is not None and profile.extra.get(extra_keys.HELD):
            from .leak_confirm import confirm_leaks  # with the memory sampler's leak table

            confirm_leaks(self.profiler, item)  # a suspected leak must grow again when run again

    def record_properties(self, item: pytest.Item, profile: TestProfile) -> None:
        """With a JUnit file: the figures and the verdicts as JUnit XML properties (what
        record_property writes); they go on the item so that the teardown report, which
        junitxml reads them from, carries them."""
        if not self.junit:
            return
        verdicts = profile.verdicts
        figures = {
            "cpu_python_s": profile.cpu_python_s,
            "cpu_native_s": profile.cpu_native_s,
            "cpu_system_s": profile.cpu_system_s,
        }
        for name, metric in METRICS.items():
            value = metric.of_test(profile)
            if value is not None:
                figures[name] = value
        for name, value in figures.items():
            item.user_properties.append((f"scalene_{name}", f"{value:.6g}"))
        failed = [v.message for v in verdicts if v.failed]
        if verdicts:
            gates = "failed: " + "; ".join(failed) if failed else "passed"
            item.user_properties.append(("scalene_gates", gates))

    # -- the session ends (on the xdist controller, or without xdist) ----------------------------
    def save_baselines(self, session: pytest.Session, commit: str | None) -> None:
        """--profile-save-baseline; `commit`: the code's, recorded in the files."""
        if not self.options.save_baseline:
            return
        from . import baseline_store  # the files and their entries: only where they are saved
        from .baseline_entry import entry_from_profile
        from .baseline_keep import within_noise
        from .comparison import NoiseRule

        tests = self.profiler.session.tests
        entries = {
            nodeid: _marked(
                entry_from_profile(profile, self.rootdir, commit), profile, self.options.repeat.more
            )
            for nodeid, profile in sorted(tests.items())
            if profile.outcome == "passed"
        }
        skipped = sorted(n for n, p in tests.items() if p.outcome != "passed")
        options = self.profiler.options

        # With a duration, the file records the most runs a saved test had.
        runs = [tests[n].extra.get(extra_keys.REPEAT, 1) for n in entries] or [1]
        repeat = max(runs) if self.options.repeat.seconds else self.options.repeat.runs

        def save() -> None:
            rule = NoiseRule.for_run(
                self.options.regression, options.interval_s, options.memory_threshold
            )
            keep = partial(within_noise, rule=rule)  # re-saving unchanged code changes no byte
            for path, count, warning in baseline_store.save(
                self.options.baseline_dir, entries, options.interval_s, options.clock, repeat, keep
            ):
                if count == 0 and warning and warning.startswith(baseline_store.UNCHANGED):
                    self.summary.append(f"baseline unchanged: {path} ({warning})")
                    continue
                note = f" ({warning})" if warning else ""
                self.summary.append(f"baseline saved: {path} ({count} tests){note}")

        directory = self.options.baseline_dir
        self.outputs.write(session, "--profile-save-baseline", directory, save)
        for nodeid in skipped:
            self.summary.append(f"baseline not saved for {nodeid}: it did not pass")

    def notes(self) -> list[str]:
        """The lines of the terminal summary's gates section (MAX_NOTES of them without -v)."""
        lines = list(self.summary)
        tests = self.profiler.session.tests.values()
        blind = cpu_resolution.session_note(tests, extra_keys.BASELINE, "the stored times")
        if blind is not None:
            lines.insert(0, blind)  # first: the notes are cut at MAX_NOTES without -v
        for nodeid, profile in self.profiler.session.tests.items():
            baseline = profile.extra.get(extra_keys.BASELINE)
            if isinstance(baseline, dict):
                lines += [f"{nodeid}: {note}" for note in baseline.get("notes", [])]
        return lines


def _marked(entry: TestEntry, profile: TestProfile, repeated: bool) -> TestEntry:
    """A saved entry whose CPU time carries the process's warm-up says so (`cpu.warm_up`)."""
    if not cold_first_call(profile, repeated):
        return entry
    return replace(entry, cpu={**entry.cpu, extra_keys.WARM_UP: 1.0})


def _confirming(judges: list[Judge]) -> bool:
    """Whether a judge asks for a timed CPU regression to be confirmed by running again."""
    return any(judge.confirms_cpu for judge in judges)
