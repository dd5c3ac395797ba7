"""--profile-compare: the stored baselines as a judge (gates/pipeline.py). The figures it
compares are sampled, or counted under valgrind with --profile-measure=instructions (then the
counts replace the timed CPU verdict; a budget on cpu_s still holds). What it could not judge,
and why, goes under extra["baseline"] with the line matching, for every report.

Every profiling session has this judge (it also says which tests' instruction counts are
missing, a perf_budget marker's too), but only --profile-compare and the instruction counts
read baselines: the files, their entries and the comparison are imported there.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ..config.options import GateOptions
from ..core import extra_keys
from ..core.model import TestProfile, counted_calls
from ..core.verdict import Verdict
from ..sampling.profiler import Profiler
from . import cpu_resolution
from .budgets import Budget, budget_of
from .machine_speed import explains_growth, slower_by
from .metrics import METRICS
from .pipeline import Unjudged

if TYPE_CHECKING:
    from .baseline_store import ModuleBaseline, TestEntry
    from .comparison import NoiseRule
    from .findings import Comparison, Finding

ONLY_INSTRUCTIONS = tuple(name for name in METRICS if name != "instructions")  # compare's skip
SUSPECT_KEY = pytest.StashKey[str]()  # the first CPU regression the confirmation re-ran for


def counts_moved(first: TestEntry, second: TestEntry, rule: NoiseRule) -> bool:
    """Two instruction counts of one test differ, either way, by what `rule` calls a
    regression (its total, or one function's)."""
    from .comparison import compare

    return any(
        f.failed
        for before, after in ((first, second), (second, first))
        for f in compare(before, after, rule, ONLY_INSTRUCTIONS).findings
    )


COUNTS_UNJUDGED = Unjudged("instruction counts (--profile-measure=instructions)")
STORED_TIMES = "the stored CPU times (--profile-compare)"
SLOW_MACHINE = Unjudged(f"{STORED_TIMES}, on a machine slower than saved")


class StoredBaselines:
    """The judge of --profile-compare, and what the instruction counts read of the baselines."""

    def __init__(self, profiler: Profiler, options: GateOptions, rootdir: str) -> None:
        self.profiler = profiler
        self.options = options
        self.rootdir = rootdir
        self.baselines: dict[str, ModuleBaseline] = {}

    @property
    def confirms_cpu(self) -> bool:
        return self.options.compare and self.options.measure == "time"

    @property
    def every_test(self) -> bool:
        return self.options.compare

    def load(self) -> None:
        """Usage errors before any test runs: no directory, or a file that cannot be read."""
        directory = self.options.baseline_dir
        if not directory.is_dir():
            if self.options.save_baseline:
                return  # the first save: nothing to compare with yet
            raise pytest.UsageError(
                f"--profile-compare: no baseline directory at {directory}; create the "
                "baselines first with --profile-save-baseline (or point --profile-baseline-dir "
                "at them)"
            )
        from .baseline_store import load_dir

        self.baselines, errors = load_dir(directory)
        if errors:
            raise pytest.UsageError(
                "--profile-compare cannot use the baselines:\n  "
                + "\n  ".join(errors)
                + "\nFix or delete the file(s), or re-create them with --profile-save-baseline."
            )

    def entry(self, nodeid: str) -> TestEntry | None:
        from .baseline_store import module_of

        stored = self.baselines.get(module_of(nodeid))
        return stored.tests.get(nodeid) if stored else None

    # -- the judge -------------------------------------------------------------------------------
    def unjudged(self, profile: TestProfile) -> Unjudged | None:
        """A test the instruction counts were asked for and could not count, whose CPU growth
        the machine's slowdown explains, or whose CPU the stored times could not gate."""
        if extra_keys.INSTRUCTIONS_MISSING in profile.extra:
            return COUNTS_UNJUDGED
        if extra_keys.MACHINE_SLOWER in profile.extra:
            return SLOW_MACHINE
        return cpu_resolution.unjudged(
            profile, extra_keys.BASELINE, STORED_TIMES, self.options.allow_ungated_cpu
        )

    def waits_for_machine(self, item: pytest.Item, profile: TestProfile) -> bool:
        entry = self.entry(profile.nodeid)
        saved = entry.cpu.get(extra_keys.MACHINE_S) if entry else None
        return slower_by(saved, profile.extra.get(extra_keys.MACHINE_S)) > 1.0

    def cpu_suspect(self, item: pytest.Item, profile: TestProfile) -> str | None:
        from .comparison import CPU_TIMED

        found = self._comparison(profile, budget_of(item))
        suspects = [f for f in (found[1].regressions if found else []) if f.metric in CPU_TIMED]
        if not suspects:
            return None
        item.stash.setdefault(SUSPECT_KEY, suspects[0].message)
        return suspects[0].message

    def verdicts(self, item: pytest.Item, profile: TestProfile) -> list[Verdict]:
        if not self.options.compare:
            return []
        from .baseline_store import module_of, path_for
        from .comparison import CPU_TIMED

        path = path_for(self.options.baseline_dir, module_of(profile.nodeid))
        shown = self._relative(path)
        found = self._comparison(profile, budget_of(item))
        if found is None:
            profile.extra[extra_keys.BASELINE] = {
                "file": shown,
                "notes": [f"no baseline for this test in {shown}: not compared"],
            }
            return []
        stored, result = found
        slower = self._slower_machine(profile, budget_of(item), result)
        if slower is not None:
            profile.extra[extra_keys.MACHINE_SLOWER] = True
            result.findings = [
                f for f in result.findings if f.metric not in CPU_TIMED or not f.failed
            ] + [slower]
        notes = [f.message for f in result.findings if f.verdict() is None]
        notes += self._setup_notes(stored)
        suspect = item.stash.get(SUSPECT_KEY, None)
        cleared = not any(f.metric in CPU_TIMED for f in result.regressions)
        if suspect is not None and cleared and stored.repeat == 1:
            notes.append(
                f"{suspect}; cleared by warm re-runs, but the baseline holds one cold run, so a "
                "regression of a first run's cost can pass (save and compare with "
                "--profile-repeat=3 to judge warm runs on both sides)"
            )
        verdicts = [v for f in result.findings if (v := f.verdict()) is not None]
        profile.extra[extra_keys.BASELINE] = {
            "file": shown,
            "matched_by_text": result.matched_by_text,
            "matched_by_offset": result.matched_by_offset,
            "new_lines": result.new_lines,
            "vanished_lines": result.vanished_lines,
            "notes": notes,
            **cpu_resolution.of_verdicts(verdicts),  # could it gate this test's CPU?
        }
        return verdicts

    def _slower_machine(
        self, profile: TestProfile, budget: Budget, result: Comparison
    ) -> Finding | None:
        """The CPU regressions are not judged when the machine's slowdown since the save
        explains them: against the baseline's CPU figures slowed as much, none is left
        (gates/machine_speed.py). Never a pass: the finding says so, and the gate is unjudged."""
        from .comparison import CPU_TIMED
        from .findings import Finding

        grown = [f for f in result.regressions if f.metric in CPU_TIMED]
        entry = self.entry(profile.nodeid)
        if not grown or entry is None:
            return None
        saved, now = entry.cpu.get(extra_keys.MACHINE_S), profile.extra.get(extra_keys.MACHINE_S)
        factor = slower_by(saved, now)
        slowed = self._comparison(profile, budget, factor) if factor > 1.0 else None
        if slowed is None or any(f.metric in CPU_TIMED for f in slowed[1].regressions):
            return None
        found, fmt = grown[0], METRICS[grown[0].metric].format
        before, after = found.baseline or 0.0, found.value or 0.0
        change = f"{after / before - 1:+.0%}" if before > 0 else "from 0"
        message = (
            f"{METRICS[found.metric].label} not judged: {fmt(after)} vs baseline "
            f"{fmt(before)} ({change}), but "
            + explains_growth(
                factor, now, saved, "than when the baseline was saved", "the fastest of each"
            )
            + " or an A/B run against a git ref (--profile-compare-ref)"
        )
        return Finding("not_compared", found.metric, found.baseline, found.value, message)

    def _setup_notes(self, stored: ModuleBaseline) -> list[str]:
        """Where the baseline was recorded otherwise than this run measures."""
        options, notes = self.profiler.options, []
        if (stored.interval_s, stored.clock) != (options.interval_s, options.clock):
            notes.append(
                f"the baseline was recorded with interval {stored.interval_s} s, clock "
                f"{stored.clock}; this run uses {options.interval_s} s, {options.clock}"
            )
        if (stored.repeat > 1) != self.options.repeat.more:
            notes.append(
                f"the baseline was saved with --profile-repeat={stored.repeat}, this run uses "
                f"{self.options.repeat}: one side's CPU time is a first (cold) run, the other's "
                "the fastest of several; use the same kind on both sides (1 run, or 2 or more)"
            )
        return notes

    def _comparison(
        self, profile: TestProfile, budget: Budget, slowed: float = 1.0
    ) -> tuple[ModuleBaseline, Comparison] | None:
        """The comparison with the stored baseline, or None when the test has none; `slowed`:
        with the baseline's timed CPU figures that many times larger."""
        from .baseline_entry import entry_from_profile
        from .baseline_store import module_of
        from .comparison import CPU_TIMED, NoiseRule, compare
        from .findings import Finding

        stored = self.baselines.get(module_of(profile.nodeid))
        entry = stored.tests.get(profile.nodeid) if stored else None
        if stored is None or entry is None:
            return None
        if slowed != 1.0:
            entry = _slowed(entry, slowed, CPU_TIMED)
        tolerance = budget.regression if budget.regression is not None else self.options.regression
        options = self.profiler.options
        rule = NoiseRule.for_run(tolerance, options.interval_s, options.memory_threshold)
        current = entry_from_profile(profile, self.rootdir)
        counted = self.options.measure == "instructions"
        before, after = entry.metrics.get("cpu_s"), current.metrics.get("cpu_s")
        warm_up = None
        if not counted and before is not None and after is not None:
            repeated = self.options.repeat.more
            warm_up = warm_up_note(entry.cpu.get(extra_keys.WARM_UP), profile, repeated)
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

    # -- what the instruction counts read --------------------------------------------------------
    def counts_rule(self) -> NoiseRule:
        from .comparison import NoiseRule

        options = self.profiler.options
        return NoiseRule.for_run(
            self.options.regression, options.interval_s, options.memory_threshold
        )

    def counted_calls(self, nodeids: list[str]) -> dict[str, int]:
        """The benchmark tests' counted calls in their stored baselines (both sides of an
        instruction comparison count as many: instructions/benchmark_count.py)."""
        found = {}
        for nodeid in nodeids:
            entry = self.entry(nodeid)
            calls = counted_calls(entry.environment) if entry else None
            if calls is not None:
                found[nodeid] = calls
        return found

    def counted_moved(self, nodeid: str, counted: TestEntry) -> bool:
        """Whether a test's instruction counts differ from its stored baseline, either way, by
        what the counts' rule calls a regression: the counting session counts such a test once
        more before it is judged. Both ways, so that a count that depends on timing is found
        whichever way it moved this time (a count that came out lower was judged, and the same
        test was "not judged" in the next run)."""
        entry = self.entry(nodeid)
        if entry is None or "instructions" not in entry.metrics:
            return False
        return counts_moved(entry, counted, self.counts_rule())


def _slowed(entry: TestEntry, factor: float, metrics: tuple[str, ...]) -> TestEntry:
    """`entry` with its figures of `metrics`, the test's and each line's, `factor` times larger."""

    def scaled(figures: dict[str, float]) -> dict[str, float]:
        return {k: v * factor if k in metrics else v for k, v in figures.items()}

    lines = tuple(replace(line, metrics=scaled(line.metrics)) for line in entry.lines)
    return replace(entry, metrics=scaled(entry.metrics), lines=lines)


def cold_first_call(profile: TestProfile, repeated: bool) -> bool:
    """The test's CPU figure is its process's first profiled call: without --profile-repeat
    (`repeated`), whose CPU figures come from the fastest of its runs (its warm-up leaves
    the first out). Confirmation re-runs do not change it: the figure they are judged against
    is the first call's."""
    return bool(profile.extra.get(extra_keys.WARM_UP)) and not repeated


def warm_up_note(baseline_warm: float | None, profile: TestProfile, repeated: bool) -> str | None:
    """Why the CPU time is not compared when one side's is its session's first call and the
    other's is not: imports and warm-up go to whichever test runs first, so such a figure depends
    on the tests that ran before it (under --lf an unchanged test read -56%). Two first calls
    (the same test first on both sides, as in every run of a whole suite) compare as usual."""
    if cold_first_call(profile, repeated) == bool(baseline_warm):
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
