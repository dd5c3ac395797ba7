"""The gates of one session, as plain methods that plugin.py's hooks call: perf_budget markers,
--profile-repeat, baselines (load, compare, confirm, save), the verdicts and their JUnit
properties.

A failed gate turns the call phase's passed report into a failed one whose message names the
metric, the limit or baseline, the measured value and the line; the profile keeps every verdict
(passed ones too) in TestProfile.verdicts and the comparison's line matching under
extra["baseline"], so the JSON, HTML, terminal and Markdown reports show them.
"""

from __future__ import annotations

import time
from dataclasses import replace
from functools import partial
from pathlib import Path

import pytest

from ..config.options import GateOptions
from ..core import runenv
from ..core.model import TestProfile, counted_calls
from ..core.outputs import Outputs
from ..core.verdict import Verdict
from ..sampling.profiler import WARM_UP_KEY, Profiler
from . import baseline_store
from .baseline_entry import entry_from_profile
from .baseline_keep import within_noise
from .budgets import MARKER, Budget, BudgetError, check, parse_marks
from .comparison import CPU_TIMED, NoiseRule, compare
from .findings import Comparison, Finding
from .leak_confirm import confirm_leaks
from .metrics import METRICS, Availability
from .repeat import (
    CONFIRM_PAUSES_S,
    NOT_REPEATABLE_KEY,
    first_run_recorded_outcome,
    rerun_of,
    run_again,
)

ONLY_INSTRUCTIONS = tuple(name for name in METRICS if name != "instructions")  # compare's skip
BUDGET_KEY = pytest.StashKey[Budget]()
CLEARED_KEY = pytest.StashKey[str]()  # a CPU suspect that warm re-runs cleared, for the notes
NO_BUDGET = Budget()  # a test without perf_budget markers


def counts_moved(
    first: baseline_store.TestEntry, second: baseline_store.TestEntry, rule: NoiseRule
) -> bool:
    """Two instruction counts of one test differ, either way, by what `rule` calls a
    regression (its total, or one function's)."""
    return any(
        f.failed
        for before, after in ((first, second), (second, first))
        for f in compare(before, after, rule, ONLY_INSTRUCTIONS).findings
    )


class Gates:
    def __init__(
        self, config: pytest.Config, profiler: Profiler, options: GateOptions, outputs: Outputs
    ) -> None:
        self.config = config
        self.profiler = profiler
        self.options = options
        self.outputs = outputs
        self.rootdir = str(config.rootpath)
        self.baselines: dict[str, baseline_store.ModuleBaseline] = {}
        self.summary: list[str] = []  # lines for the terminal summary
        # Tests whose call phase runs: their subtests' reports (when == "call") are not judged.
        self.in_call: set[str] = set()
        # The figures go on the item as JUnit properties only when a JUnit file is written:
        # 10 properties a test cost 15 us of its profiled time, and every report copies them.
        self.junit = bool(getattr(config.option, "xmlpath", None))

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
        needs_memory = [
            flag
            for flag, on in (
                ("--profile-fail-on-leak", opts.fail_on_leak),
                ("--profile-max-copy-mb-s", opts.max_copy_mb_s is not None),
            )
            if on
        ]
        if needs_memory and (why := self.availability().memory) is not None:
            raise pytest.UsageError(
                f"{needs_memory[0]} needs memory profiling, which is off in this run "
                f"({why}); without it this gate could never fail"
            )
        if not opts.compare:
            return
        directory = opts.baseline_dir
        if not directory.is_dir():
            if opts.save_baseline:
                return  # the first save: nothing to compare with yet
            raise pytest.UsageError(
                f"--profile-compare: no baseline directory at {directory}; create the "
                "baselines first with --profile-save-baseline (or point --profile-baseline-dir "
                "at them)"
            )
        self.baselines, errors = baseline_store.load_dir(directory)
        if errors:
            raise pytest.UsageError(
                "--profile-compare cannot use the baselines:\n  "
                + "\n  ".join(errors)
                + "\nFix or delete the file(s), or re-create them with --profile-save-baseline."
            )

    # -- each test -------------------------------------------------------------------------------
    def before_call(self, item: pytest.Item) -> None:
        """Read the test's perf_budget markers; a wrong one fails the test before it runs."""
        marks = [(node.nodeid or node.name, m) for node, m in item.iter_markers_with_node(MARKER)]
        if not marks:
            return  # judge() reads no BUDGET_KEY as no budget
        try:
            item.stash[BUDGET_KEY] = parse_marks(marks)
            error = None
        except BudgetError as exc:
            error = str(exc)
        if error is not None:
            pytest.fail(error, pytrace=False)  # the test does not run: its marker is wrong

    def after_call(self, item: pytest.Item) -> None:
        """The first run is profiled: --profile-repeat's runs, then the CPU confirmation, then
        the leak confirmation."""
        if item.nodeid not in self.profiler.session.tests:
            return
        repeat = self.options.repeat
        confirm_cpu = self.options.compare and self.options.measure == "time"
        if (repeat.more or confirm_cpu) and first_run_recorded_outcome(item):
            return  # a unittest skip or failure: its outcome comes with the report
        if repeat.more:
            rerun = rerun_of(item)
            run_again(self.profiler, item.nodeid, repeat.runs - 1, rerun, repeat.seconds)
        if confirm_cpu:
            self._confirm_cpu_regressions(item)
        confirm_leaks(self.profiler, item)  # a suspected leak must grow again when run again

    def _confirm_cpu_regressions(self, item: pytest.Item) -> None:
        """A CPU regression must survive more runs after a pause before it fails: on a shared
        machine another process can slow every repeat of a test for a second or more. The
        fastest of all runs is judged (docs/baselines.md, the noise rule); the re-runs change
        only the CPU figures, never the counted ones."""
        budget = item.stash.get(BUDGET_KEY, NO_BUDGET)
        suspect: str | None = None
        for pause in (*CONFIRM_PAUSES_S, None):
            profile = self.profiler.session.tests[item.nodeid]
            if NOT_REPEATABLE_KEY in profile.extra:
                return  # no more runs: judged on those it had
            found = self._comparison(profile, budget)
            suspects = [f for f in (found[1].regressions if found else []) if f.metric in CPU_TIMED]
            if not suspects:
                break
            if pause is None:
                return  # regressed after every round: the verdict fails the test
            suspect = suspect or suspects[0].message
            time.sleep(pause)
            runs = self.options.repeat.runs
            run_again(self.profiler, item.nodeid, runs, rerun_of(item), warmup=False)
        if suspect is not None and found is not None and found[0].repeat == 1:
            item.stash[CLEARED_KEY] = (
                f"{suspect}; cleared by warm re-runs, but the baseline holds one cold run, so a "
                "regression of a first run's cost can pass (save and compare with "
                "--profile-repeat=3 to judge warm runs on both sides)"
            )

    def judge(
        self,
        item: pytest.Item,
        report: pytest.TestReport,
        profile: TestProfile,
        others: list[Verdict],
    ) -> list[str]:
        """Record the verdicts (budgets, then `others` such as the A/B one, then the baseline's)
        and the JUnit properties; return the messages of the failed gates."""
        verdicts: list[Verdict] = []
        if report.passed:  # a failing test is not judged: its figures are not those of a pass
            budget = item.stash.get(BUDGET_KEY, NO_BUDGET).with_defaults(
                self.options.fail_on_leak, self.options.max_copy_mb_s
            )
            if budget.limits:
                verdicts += check(budget, profile, self.availability())
            verdicts += others
            if self.options.compare:
                verdicts += self._compare(profile, budget)
                if CLEARED_KEY in item.stash:
                    profile.extra["baseline"]["notes"].append(item.stash[CLEARED_KEY])
        if verdicts:
            profile.verdicts = verdicts
        if self.junit:
            self._properties(item, profile, verdicts)
        return [v.message for v in verdicts if v.failed]

    def counts_rule(self) -> NoiseRule:
        options = self.profiler.options
        return NoiseRule.for_run(
            self.options.regression, options.interval_s, options.memory_threshold
        )

    def counted_calls(self, nodeids: list[str]) -> dict[str, int]:
        """The benchmark tests' counted calls in their stored baselines (both sides of an
        instruction comparison count as many: instructions/benchmark_count.py)."""
        found = {}
        for nodeid in nodeids:
            stored = self.baselines.get(baseline_store.module_of(nodeid))
            entry = stored.tests.get(nodeid) if stored else None
            calls = counted_calls(entry.environment) if entry else None
            if calls is not None:
                found[nodeid] = calls
        return found

    def counted_moved(self, nodeid: str, counted: baseline_store.TestEntry) -> bool:
        """Whether a test's instruction counts differ from its stored baseline, either way, by
        what the counts' rule calls a regression: the counting session counts such a test once
        more before it is judged. Both ways, so that a count that depends on timing is found
        whichever way it moved this time (a count that came out lower was judged, and the same
        test was "not judged" in the next run)."""
        stored = self.baselines.get(baseline_store.module_of(nodeid))
        entry = stored.tests.get(nodeid) if stored else None
        if entry is None or "instructions" not in entry.metrics:
            return False
        return counts_moved(entry, counted, self.counts_rule())

    def _comparison(
        self, profile: TestProfile, budget: Budget
    ) -> tuple[baseline_store.ModuleBaseline, Comparison] | None:
        """The comparison with the stored baseline, or None when the test has none."""
        stored = self.baselines.get(baseline_store.module_of(profile.nodeid))
        entry = stored.tests.get(profile.nodeid) if stored else None
        if stored is None or entry is None:
            return None
        tolerance = budget.regression if budget.regression is not None else self.options.regression
        options = self.profiler.options
        rule = NoiseRule.for_run(tolerance, options.interval_s, options.memory_threshold)
        current = entry_from_profile(profile, self.rootdir)
        # Counting instructions replaces the timed CPU verdict (a budget on cpu_s still holds).
        counted = self.options.measure == "instructions"
        before, after = entry.metrics.get("cpu_s"), current.metrics.get("cpu_s")
        warm_up = None
        if not counted and before is not None and after is not None:
            repeated = self.options.repeat.more
            warm_up = _warm_up(entry.cpu.get(WARM_UP_KEY), profile, repeated)
        result = compare(entry, current, rule, CPU_TIMED if counted or warm_up else ())
        if warm_up is not None:
            result.findings.append(Finding("not_compared", "cpu_s", before, after, warm_up))
        return stored, result

    def _relative(self, path: Path) -> str:
        """Rootdir-relative, like every path in the reports, when the baselines live there."""
        try:
            return Path(path).resolve().relative_to(Path(self.rootdir).resolve()).as_posix()
        except ValueError:
            return str(path)

    def _compare(self, profile: TestProfile, budget: Budget) -> list[Verdict]:
        path = baseline_store.path_for(
            self.options.baseline_dir, baseline_store.module_of(profile.nodeid)
        )
        shown = self._relative(path)
        found = self._comparison(profile, budget)
        if found is None:
            profile.extra["baseline"] = {
                "file": shown,
                "notes": [f"no baseline for this test in {shown}: not compared"],
            }
            return []
        stored, result = found
        options = self.profiler.options
        notes = [f.message for f in result.findings if f.verdict() is None]
        if (stored.interval_s, stored.clock) != (options.interval_s, options.clock):
            notes.append(
                f"the baseline was recorded with interval {stored.interval_s} s, clock "
                f"{stored.clock}; this run uses {options.interval_s} s, {options.clock}"
            )
        if (stored.repeat > 1) != self.options.repeat.more:
            notes.append(
                f"the baseline was saved with --profile-repeat={stored.repeat}, this run uses "
                f"{self.options.repeat}: one side's CPU time is a first (cold) run, the other's "
                "the fastest warm run; use the same kind on both sides (1 run, or 2 or more)"
            )
        profile.extra["baseline"] = {
            "file": shown,
            "matched_by_text": result.matched_by_text,
            "matched_by_offset": result.matched_by_offset,
            "new_lines": result.new_lines,
            "vanished_lines": result.vanished_lines,
            "notes": notes,
        }
        return [v for f in result.findings if (v := f.verdict()) is not None]

    def _properties(self, item: pytest.Item, profile: TestProfile, verdicts: list[Verdict]) -> None:
        """The figures as JUnit XML properties (what record_property writes); they go on the
        item so that the teardown report, which junitxml reads them from, carries them."""
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
        runs = [tests[n].extra.get("repeat", 1) for n in entries] or [1]
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
        """The lines of the terminal summary's gates section (without -v, plugin.py cuts them)."""
        lines = list(self.summary)
        for nodeid, profile in self.profiler.session.tests.items():
            baseline = profile.extra.get("baseline")
            if isinstance(baseline, dict):
                lines += [f"{nodeid}: {note}" for note in baseline.get("notes", [])]
        return lines


def _cold_first_call(profile: TestProfile, repeated: bool) -> bool:
    """The test's CPU figure is its process's first profiled call: without --profile-repeat
    (`repeated`), whose CPU figures come from the runs after the first. Confirmation re-runs do
    not change it: the figure they are judged against is the first call's."""
    return bool(profile.extra.get(WARM_UP_KEY)) and not repeated


def _marked(
    entry: baseline_store.TestEntry, profile: TestProfile, repeated: bool
) -> baseline_store.TestEntry:
    """A saved entry whose CPU time carries the process's warm-up says so (`cpu.warm_up`)."""
    if not _cold_first_call(profile, repeated):
        return entry
    return replace(entry, cpu={**entry.cpu, WARM_UP_KEY: 1.0})


def _warm_up(baseline_warm: float | None, profile: TestProfile, repeated: bool) -> str | None:
    """Why the CPU time is not compared when one side's is its session's first call and the
    other's is not: imports and warm-up go to whichever test runs first, so such a figure depends
    on the tests that ran before it (under --lf an unchanged test read -56%). Two first calls
    (the same test first on both sides, as in every run of a whole suite) compare as usual."""
    if _cold_first_call(profile, repeated) == bool(baseline_warm):
        return None
    if baseline_warm:
        whose = "the baseline's CPU time was saved from its session's first profiled call"
    else:
        whose = "this run's CPU time is its session's first profiled call (not the baseline's)"
    return (
        f"CPU time not compared: {whose}, which carries the process's warm-up (imports, first "
        "calls, caches); it is compared when both sides ran first or neither did, or with "
        "--profile-repeat=2 or more on both sides (warm runs)"
    )
