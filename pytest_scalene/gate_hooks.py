"""The gates as pytest hooks: perf_budget markers, --profile-repeat, baselines and regression
verdicts, JUnit properties, the Markdown summary, and xdist merging. plugin.py registers one
GatePlugin per session.

A failed gate turns the call phase's passed report into a failed one whose message names the
metric, the limit or baseline, the measured value and the line; the profile keeps every verdict
(passed ones too) under extra["verdicts"] and the comparison's line matching under
extra["baseline"], so the JSON, HTML, terminal and Markdown reports show them.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from . import baseline_store, markdown_report, xdist_bridge
from .ab.git_tree import saved_from
from .ab.plugin import AB_KEY, verdict_of
from .atomic_write import write_text_atomic
from .baseline_keep import within_noise
from .budgets import MARKER, Budget, BudgetError, check, parse_marks
from .comparison import CPU_TIMED, Comparison, NoiseRule, compare
from .gates import METRICS, Availability
from .model import TestProfile
from .options import GateOptions
from .profiler import Profiler
from .repeat import NOT_REPEATABLE_KEY, first_run_recorded_outcome, rerun_of, run_again
from .terminal_summary import wants_details

BUDGET_KEY = pytest.StashKey[Budget]()
CLEARED_KEY = pytest.StashKey[str]()  # a CPU suspect that warm re-runs cleared, for the notes
# Pauses before each confirmation of a CPU regression: with the runs, the rounds span ~10 s,
# longer than the slowest CPU phase seen on the development VM (6.5 s; docs/baselines.md).
CONFIRM_PAUSES_S = (0.5, 1.0, 2.0, 4.0)
PLUGIN_NAME = "pytest-scalene-gates"
MAX_NOTES = 10  # summary lines shown without -v


def _shim_loaded() -> bool:
    try:
        from . import _native

        return bool(_native.shim_loaded())
    except Exception:  # no extension built, or an older one: memory profiling is not there
        return False


def _preload_problem() -> str:
    try:
        from .preload import unavailable_reason

        reason = unavailable_reason()
    except ImportError:
        reason = None
    return reason or (
        "the memory shim is not preloaded in this process; pytest-scalene preloads it when run "
        "with --profile or --profile-memory=yes"
    )


class GatePlugin:
    def __init__(self, config: pytest.Config, profiler: Profiler, options: GateOptions) -> None:
        self.config = config
        self.profiler = profiler
        self.options = options
        self.rootdir = str(config.rootpath)
        self.baselines: dict[str, baseline_store.ModuleBaseline] = {}
        self.summary: list[str] = []  # lines for the terminal summary
        self.worker = xdist_bridge.is_worker(config)
        # Tests whose call phase runs: their subtests' reports (when == "call") are not judged.
        self._in_call: set[str] = set()

    # -- session ---------------------------------------------------------------------------------
    def availability(self) -> Availability:
        memory = self.profiler.options.memory
        gpu = self.profiler.options.gpu
        why = Availability()
        if memory == "no":
            why = Availability(memory="--profile-memory=no", gpu=why.gpu)
        elif not _shim_loaded():
            why = Availability(memory=_preload_problem(), gpu=why.gpu)
        if gpu == "no":
            why = Availability(memory=why.memory, gpu="--profile-gpu=no")
        return why

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        opts = self.options
        needs_memory = [
            flag
            for flag, on in (
                ("--profile-fail-on-leak", opts.fail_on_leak),
                ("--profile-max-copy-mb-s", opts.max_copy_mb_s is not None),
            )
            if on
        ]
        if needs_memory and (self.profiler.options.memory == "no" or not _shim_loaded()):
            raise pytest.UsageError(
                f"{needs_memory[0]} needs memory profiling, which is off in this run "
                f"({self.availability().memory}); without it this gate could never fail"
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
    def _wants_profile(self, item: pytest.Item) -> bool:
        return self.profiler.options.enabled or item.get_closest_marker(MARKER) is not None

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        if not self._wants_profile(item):
            return (yield)
        marks = [(node.nodeid or node.name, m) for node, m in item.iter_markers_with_node(MARKER)]
        try:
            item.stash[BUDGET_KEY] = parse_marks(marks)
            error = None
        except BudgetError as exc:
            error = str(exc)
        if error is not None:
            pytest.fail(error, pytrace=False)  # the test does not run: its marker is wrong
        self._in_call.add(item.nodeid)
        try:
            result = yield
            if item.nodeid not in self.profiler.session.tests:
                return result
            if first_run_recorded_outcome(item):
                return result  # a unittest skip or failure: its outcome comes with the report
            repeat = self.options.repeat
            if repeat.more:
                rerun = rerun_of(item)
                run_again(self.profiler, item.nodeid, repeat.runs - 1, rerun, repeat.seconds)
            if self.options.compare and self.options.measure == "time":
                self._confirm_cpu_regressions(item)
            return result
        finally:
            self._in_call.discard(item.nodeid)

    def _confirm_cpu_regressions(self, item: pytest.Item) -> None:
        """A CPU regression must survive more runs after a pause before it fails: on a shared
        machine another process can slow every repeat of a test for a second or more. The
        fastest of all runs is judged (docs/baselines.md, the noise rule); the re-runs change
        only the CPU figures, never the counted ones."""
        budget = item.stash.get(BUDGET_KEY, Budget())
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

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        profile = self.profiler.session.tests.get(item.nodeid)
        # A subtest's report (unittest's subTest, the subtests fixture) comes while the call
        # runs: judging each one grew user_properties, which every later subtest report
        # copies (quadratic: 6000 subtests took 1.5 GB), and judged a half-run profile.
        if report.when != "call" or profile is None or item.nodeid in self._in_call:
            return report
        try:
            failures = self._judge(item, report, profile)
        except Exception as exc:  # a bug in the gates must not pass a test silently
            failures = [f"pytest-scalene could not check this test's gates: {exc!r}"]
        if failures and report.passed:
            report.outcome = "failed"
            report.longrepr = "\n".join(failures)
            profile.outcome = "failed"
        return report

    def _judge(
        self, item: pytest.Item, report: pytest.TestReport, profile: TestProfile
    ) -> list[str]:
        """Record verdicts and JUnit properties; return the messages of the failed gates."""
        verdicts: list[dict[str, Any]] = []
        if report.passed:  # a failing test is not judged: its figures are not those of a pass
            budget = item.stash.get(BUDGET_KEY, Budget()).with_defaults(
                self.options.fail_on_leak, self.options.max_copy_mb_s
            )
            for result in check(budget, profile, self.availability()):
                verdicts.append(
                    {
                        "kind": "budget",
                        "metric": result.metric,
                        "limit": result.limit,
                        "value": result.value,
                        "passed": result.passed,
                        "message": result.message,
                        "line": result.line,
                    }
                )
            if isinstance(found := profile.extra.get(AB_KEY), dict):
                verdicts += [v for v in [verdict_of(found)] if v is not None]
            if self.options.compare:
                verdicts += self._compare(profile, budget)
                if CLEARED_KEY in item.stash:
                    profile.extra["baseline"]["notes"].append(item.stash[CLEARED_KEY])
        if verdicts:
            profile.extra[markdown_report.VERDICTS_KEY] = verdicts
        self._properties(item, profile, verdicts)
        return [v["message"] for v in verdicts if not v["passed"]]

    def _comparison(
        self, profile: TestProfile, budget: Budget
    ) -> tuple[baseline_store.ModuleBaseline, Comparison, NoiseRule] | None:
        """The comparison with the stored baseline, or None when the test has none."""
        stored = self.baselines.get(baseline_store.module_of(profile.nodeid))
        entry = stored.tests.get(profile.nodeid) if stored else None
        if stored is None or entry is None:
            return None
        tolerance = budget.regression if budget.regression is not None else self.options.regression
        options = self.profiler.options
        rule = NoiseRule.for_run(tolerance, options.interval_s, options.memory_threshold)
        current = baseline_store.entry_from_profile(profile, self.rootdir)
        # Counting instructions replaces the timed CPU verdict (a budget on cpu_s still holds).
        skip = CPU_TIMED if self.options.measure == "instructions" else ()
        return stored, compare(entry, current, rule, skip), rule

    def _relative(self, path: Path) -> str:
        """Rootdir-relative, like every path in the reports, when the baselines live there."""
        try:
            return Path(path).resolve().relative_to(Path(self.rootdir).resolve()).as_posix()
        except ValueError:
            return str(path)

    def _compare(self, profile: TestProfile, budget: Budget) -> list[dict[str, Any]]:
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
        stored, result, rule = found
        options = self.profiler.options
        notes = [f.message for f in result.findings if f.kind not in ("regression", "ok")]
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
        return [
            {
                "kind": "regression",
                "metric": f.metric,
                "limit": None
                if f.baseline is None
                else f.baseline * (1 + rule.tolerance_for(f.metric)),
                "baseline": f.baseline,
                "value": f.value,
                "passed": not f.failed,
                "message": f.message,
                "line": f.line,
            }
            for f in result.findings
            if f.kind in ("regression", "ok")
        ]

    def _properties(
        self, item: pytest.Item, profile: TestProfile, verdicts: list[dict[str, Any]]
    ) -> None:
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
        failed = [v["message"] for v in verdicts if not v["passed"]]
        if verdicts:
            gates = "failed: " + "; ".join(failed) if failed else "passed"
            item.user_properties.append(("scalene_gates", gates))

    # -- the end ---------------------------------------------------------------------------------
    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        xdist_bridge.receive(getattr(node, "workeroutput", {}) or {}, self.profiler.session)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.worker:
            xdist_bridge.send(self.config, self.profiler.session)
            return
        if self.options.save_baseline:
            self._save_baselines(session)
        if self.options.markdown_path is not None:
            outcomes = markdown_report.RunOutcomes.of(session)
            text = markdown_report.render(self.profiler.session, self.rootdir, outcomes)
            self._write(
                session,
                "--profile-markdown",
                lambda: write_text_atomic(self.options.markdown_path, text),
            )  # type: ignore[arg-type]

    def _save_baselines(self, session: pytest.Session) -> None:
        tests = self.profiler.session.tests
        commit = saved_from(Path(self.rootdir))
        entries = {
            nodeid: baseline_store.entry_from_profile(profile, self.rootdir, commit)
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

        self._write(session, "--profile-save-baseline", save)
        for nodeid in skipped:
            self.summary.append(f"baseline not saved for {nodeid}: it did not pass")

    def _write(self, session: pytest.Session, option: str, action: Any) -> None:
        """Run a write; a failure fails the run with one line naming the option, no traceback."""
        try:
            action()
        except OSError as exc:
            name = exc.filename or ""
            self.summary.append(f"ERROR {option}: cannot write {name}: {exc.strerror or exc}")
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        lines = [ln for ln in self.summary if not ln.startswith("ERROR")]
        lines += [ln for ln in self.summary if ln.startswith("ERROR")]  # also at the very end
        for nodeid, profile in self.profiler.session.tests.items():
            baseline = profile.extra.get("baseline")
            if isinstance(baseline, dict):
                lines += [f"{nodeid}: {note}" for note in baseline.get("notes", [])]
            ab = profile.extra.get(AB_KEY)
            if isinstance(ab, dict) and "note" in ab:
                lines.append(f"{nodeid}: A/B against {ab['ref']}: {ab['note']}")
        if len(lines) > MAX_NOTES and not wants_details(
            self.config
        ):  # thousands of tests: a screen
            lines = [*lines[:MAX_NOTES], f"and {len(lines) - MAX_NOTES} more (-v shows them)"]
        if not lines:
            return
        terminalreporter.write_sep("-", "pytest-scalene gates")
        for line in lines:
            terminalreporter.write_line(line, red=line.startswith("ERROR"))
