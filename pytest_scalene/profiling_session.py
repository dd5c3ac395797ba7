"""A pytest session that profiles: its parts (`Run`, in config.stash) and its hooks.

plugin.py builds the run (`start`) only in a session that profiles: at configure where an option
asks for pytest-scalene or xdist distributes the tests, else after collection where a selected
test carries a perf_budget marker. A session that does neither never imports this module and
calls none of these hooks: the plugin costs it its options and markers alone.

`SessionHooks` implements every hook of a profiling session once, each calling plain methods of
the run's parts in a fixed order, so that the order is read here rather than worked out from
tryfirst and registration order. Two small plugin objects keep hooks that nothing else
implements, registered only when they act: the crash-safe JSON checkpoint
(reports/json_report.py) and the xdist report relay (xdist/worker_profiles.py).
docs/architecture.md maps the package.
"""

from __future__ import annotations

import json
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .benchmark.calls import BenchmarkCalls
from .config.history_options import HistoryOptions
from .config.options import EXIT_UNJUDGED, GateOptions, ProfileOptions
from .core import extra_keys, runenv
from .core.outputs import Outputs
from .gates.budgets import BUDGET_KEY
from .gates.judging import Gates
from .gates.pipeline import Judge, judge_report, unjudged_counts
from .instructions import counts
from .reports.text import terminal_width
from .sampling.gpu_sampler import GpuSetup
from .sampling.profiler import Profiler
from .selection.selector import Selection
from .subprocesses import child_profiles
from .xdist.worker_preload import preloaded_workers

# What only some sessions use is imported where it is used.
if TYPE_CHECKING:
    from .compare_ref.ref_judge import CompareRef
    from .history.history_gate import History
    from .sampling.stack_recorder import StackRecorder

STACKS_OUTPUT_KEY = "pytest_scalene_stacks"  # a worker's stacks, in xdist's workeroutput
MAX_NOTES = 10  # gate notes shown without -v
HOOKS_NAME = "pytest-scalene-session"


@dataclass
class Run:
    """The parts of one pytest session that profiles."""

    profiler: Profiler
    gates: Gates
    outputs: Outputs
    gpu: GpuSetup
    worker: bool  # an xdist worker: its profiles go to the controller, which writes the files
    instructions: counts.InstructionCounts
    selection: Selection  # the code map: which tests the costly gates measure
    ab: CompareRef | None = None  # --profile-compare-ref
    stacks: StackRecorder | None = None  # --profile-speedscope, --profile-html
    history: History | None = None  # --profile-history
    unjudged_status: int | None = None  # EXIT_UNJUDGED, when the run fails for them
    benchmark: BenchmarkCalls = field(kw_only=True)  # the fixture's calls
    judges: list[Judge] = field(default_factory=list)  # every gate, in its verdicts' order
    every_test: bool = True  # a judge may judge a test without a perf_budget marker
    reruns: bool = True  # a test's first run may be followed by more (Gates.after_call)


RUN_KEY = pytest.StashKey[Run]()


def start(config: pytest.Config, *, after_sessionstart: bool = False) -> Run:
    """Build the session's run and register its hooks. `after_sessionstart`: built after
    collection, where pytest_sessionstart has passed: its checks run here instead."""
    options = ProfileOptions.from_config(config)
    profiler = Profiler(options, str(config.rootpath))
    config.add_cleanup(profiler.close)  # the sampler's signal and patches are kept till then
    # What a session's options leave unused is not imported (docs/benchmarks-ms-suite.md).
    if options.memory != "no":
        from .sampling import memory_sampler

        memory_sampler.attach(profiler, config.add_cleanup)  # memory, leaks, copy: with the shim
    child_profiles.attach(profiler, config.add_cleanup)  # --profile-subprocesses
    if options.json_path is not None:
        from .reports import json_report

        json_report.install(config, profiler.session, options.json_path)  # crash-safe JSON
    if runenv.is_xdist_worker(config) or runenv.is_xdist_controller(config):
        from .xdist import worker_profiles

        worker_profiles.install(config, profiler.session)  # a crashed worker loses one test
    gate_options = GateOptions.from_config(config)
    if gate_options.measure == "instructions":
        from .instructions import runner

        if (problem := runner.problem()) is not None:
            raise pytest.UsageError(f"--profile-measure=instructions: {problem}")
    worker = runenv.is_xdist_worker(config)
    ab = None
    if gate_options.compare_ref and not worker:
        from .compare_ref import ref_judge

        setup = ref_judge.setup_for(config, gate_options.compare_ref)  # a bad ref: a usage error
        ab = ref_judge.CompareRef(config, profiler, setup)
    outputs = Outputs()
    gpu = GpuSetup(profiler)
    config.add_cleanup(gpu.close)
    run = config.stash[RUN_KEY] = Run(
        profiler,
        Gates(config, profiler, gate_options, outputs),
        outputs,
        gpu,
        worker,
        counts.InstructionCounts(config, profiler, gate_options.measure),  # valgrind, if needed
        Selection(config, profiler, gate_options),
        ab,
        benchmark=BenchmarkCalls(profiler.collectors),  # a collector while a test uses it
    )
    if run.selection.recorder is not None:  # records each profiled test's code map
        config.pluginmanager.register(run.selection, "pytest-scalene-selection")
    history = HistoryOptions.from_config(config)
    if history.url:
        from .history.history_gate import History

        run.history = History(config, profiler, history)
    run.judges = [
        run.gates.budgets,
        *([run.ab] if run.ab is not None else []),
        run.gates.stored,  # sampled figures, or counted ones (--profile-measure=instructions)
        *([run.history] if run.history is not None else []),
    ]
    if options.gpu == "yes":
        gpu.ensure()  # a missing GPU is a usage error now, not at the first profiled test
    # Stacks cost a walk per sample: only for the outputs that draw flame graphs.
    if options.speedscope_path is not None or options.html_path is not None:
        from .sampling.stack_recorder import StackRecorder

        run.stacks = StackRecorder(profiler.scope)
        profiler.listeners.append(run.stacks)
    config.pluginmanager.register(SessionHooks(run), HOOKS_NAME)
    if after_sessionstart:
        _check_session(run)
    return run


def _check_session(run: Run) -> None:
    if run.history is not None:
        run.history.start()  # a bad URL or a foreign database stops the run before any test
    run.gates.check_session()  # usage errors, the baselines to compare with
    # Decided once a session, for every test: most sessions (plain --profile) judge only tests
    # with a perf_budget marker and run each test once.
    run.every_test = any(judge.every_test for judge in run.judges)
    run.reruns = run.gates.reruns(run.judges)


def after_collection(session: pytest.Session, run: Run) -> None:
    """The sessions that run the selected tests elsewhere, before any test runs here."""
    setup = run.ab.setup if run.ab is not None else None
    run.selection.after_collection(session.items, setup)  # unchanged: not measured below
    if run.ab is not None:
        run.ab.after_collection(session)  # A/B runs against the git ref
    run.instructions.after_collection(session, run.gates.stored)  # instruction counts, valgrind


class SessionHooks:
    """The hooks of a session that profiles (registered by `start`)."""

    def __init__(self, run: Run) -> None:
        self.run = run

    # -- start-up --------------------------------------------------------------------------------
    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> Generator[None, None, None]:
        run = self.run
        _check_session(run)
        if run.worker:
            return (yield)
        with preloaded_workers(session.config):  # xdist's workers start with the shim too
            return (yield)

    # -- each test -------------------------------------------------------------------------------
    # trylast: the innermost wrapper, whenever it was registered, so that the profile holds
    # the test's call and not other plugins' work around it (output capture, logging, timeouts).
    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        run = self.run
        if not run.profiler.wants(item):
            return (yield)
        nodeid = item.nodeid  # a property that builds the string at each read
        gates = run.gates
        gates.before_call(item)  # a wrong perf_budget marker fails the test before it runs
        gates.in_call.add(nodeid)
        run.benchmark.watch(item)  # a benchmark test is measured per call of its function
        try:
            run.gpu.ensure()  # loads NVML once, at the first profiled test
            running = run.profiler.start_test(nodeid)  # profiling(), without its generator
            try:
                result = yield
            finally:
                run.profiler.stop_test(running)
            if run.reruns or running.profile.extra.get(extra_keys.HELD):
                gates.after_call(item, run.judges)  # --profile-repeat, confirmations, leaks
            return result
        finally:
            run.benchmark.unwatch()
            gates.in_call.discard(nodeid)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        run = self.run
        in_call = call.when == "call"
        if in_call:  # the other sessions' results go on the profile before it is judged
            run.instructions.attach(item, call)
            if run.ab is not None:
                run.ab.attach(item, call)
        report = yield
        if not in_call and report.outcome != "failed":
            return report  # a setup or teardown that passed (or skipped) changes no profile
        nodeid = item.nodeid
        profile = run.profiler.session.tests.get(nodeid)
        if profile is None:
            return report
        # The profile's outcome is the test's: failed if any phase failed, else the call's.
        if profile.outcome != "failed":
            profile.outcome = report.outcome
        # A subtest's report (unittest's subTest, the subtests fixture) comes while the call
        # runs: judging each one grew user_properties, which every later subtest report
        # copies (quadratic: 6000 subtests took 1.5 GB), and judged a half-run profile.
        if in_call and nodeid not in run.gates.in_call:
            if run.every_test or BUDGET_KEY in item.stash:
                judge_report(run.judges, item, report, profile)  # a failed verdict fails it
            run.gates.record_properties(item, profile)  # JUnit, with --junitxml
        return report

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """pytest-xdist, on the controller, for each worker it starts."""
        self.run.instructions.share_with_worker(node)

    # -- the end ---------------------------------------------------------------------------------
    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """pytest-xdist, on the controller: a worker's profiles and stacks join the session's."""
        from .xdist import worker_profiles

        run = self.run
        output = getattr(node, "workeroutput", None) or {}
        worker_profiles.receive(output, run.profiler.session)
        run.selection.receive(output)
        text = output.get(STACKS_OUTPUT_KEY)
        if run.stacks is not None and text:
            run.stacks.merge_payload(json.loads(text))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        run, config = self.run, session.config
        if run.worker:  # on xdist, the controller writes the files
            from .xdist import worker_profiles

            worker_profiles.send(config, run.profiler.session)
            run.selection.send(config)
            if run.stacks is not None:
                payload = json.dumps(run.stacks.to_payload())
                config.workeroutput[STACKS_OUTPUT_KEY] = payload  # type: ignore[attr-defined]
            return
        if run.gates.options.save_baseline:  # git runs only then (in a big repository, seconds)
            from .compare_ref.git_tree import saved_from

            run.gates.save_baselines(session, saved_from(Path(config.rootpath)))
        run.selection.save()  # the code map, beside the baselines
        # Before the report files: the JSON and the Markdown summary count them too.
        profile = run.profiler.session
        unjudged = unjudged_counts(run.judges, profile.tests.values())
        profile.unjudged = [
            {"gate": w.gate, "tests": n, "fails": w.fails} for w, n in unjudged.items()
        ]
        if (
            any(why.fails for why in unjudged)
            and not run.gates.options.allow_unjudged
            and session.exitstatus == 0
        ):
            session.exitstatus = run.unjudged_status = EXIT_UNJUDGED  # never a silent pass
        _write_report_files(session, run)
        if run.history is not None:
            recorded = run.selection.recorded()  # the code map goes into the history too
            run.history.record(session, recorded.to_json() if recorded else None)

    @pytest.hookimpl(trylast=True)  # last, so that the errors end the output
    def pytest_terminal_summary(self, terminalreporter: Any, config: pytest.Config) -> None:
        from .reports import terminal_summary

        run = self.run
        width = terminal_width(config)  # pytest's own width: rows never wrap mid-figure
        if run.history is not None:
            run.history.write_summary(terminalreporter)
        _write_gate_notes(terminalreporter, config, run)
        profile = run.profiler.session
        if profile.tests:
            terminalreporter.write_sep("=", "pytest-scalene profile")
            rootdir = str(config.rootpath)
            if terminal_summary.wants_details(config):  # -v: the per-test, per-line report
                from .reports import terminal_report

                text = terminal_report.render(profile, rootdir, run.profiler.options.top, width)
            else:
                text = terminal_summary.render_summary(profile, rootdir, width)
            terminalreporter.write_line(text)
        if run.outputs.errors:  # repeated next to the final status line, however long the report
            terminalreporter.write_sep("-", "pytest-scalene errors", red=True)
            for line in run.outputs.errors:
                terminalreporter.write_line(line, red=True, bold=True)
        if lines := terminal_summary.unjudged_lines(
            run.profiler.session.unjudged,
            run.unjudged_status,
            run.gates.options.allow_unjudged,
            "--profile-allow-unjudged",
            width,
        ):
            terminalreporter.write_sep("-", "pytest-scalene: not judged", red=True)
            for line in lines:
                terminalreporter.write_line(line, red=run.unjudged_status is not None)


def _write_report_files(session: pytest.Session, run: Run) -> None:
    """--profile-markdown, --profile-html, --profile-speedscope and --profile-json."""
    options, profile = run.profiler.options, run.profiler.session
    rootdir = str(session.config.rootpath)
    markdown = run.gates.options.markdown_path
    if markdown is not None:
        from .core.atomic_write import write_text_atomic
        from .reports import markdown_report

        text = markdown_report.render(profile, rootdir, markdown_report.RunOutcomes.of(session))
        run.outputs.write(
            session, "--profile-markdown", markdown, lambda: write_text_atomic(markdown, text)
        )
    html = options.html_path
    if html is not None:
        from .reports.html_report import write_html

        run.outputs.write(
            session,
            "--profile-html",
            html,
            lambda: write_html(profile, html, rootdir, stacks=run.stacks),
        )
    speedscope, stacks = options.speedscope_path, run.stacks
    if speedscope is not None and stacks is not None:
        from .reports.speedscope import write_speedscope

        run.outputs.write(
            session,
            "--profile-speedscope",
            speedscope,
            lambda: write_speedscope(profile, stacks, speedscope),
        )
    json_path = options.json_path
    if json_path is not None:
        from .reports import json_report

        run.outputs.write(
            session, "--profile-json", json_path, lambda: json_report.write_json(profile, json_path)
        )


def _write_gate_notes(terminalreporter: Any, config: pytest.Config, run: Run) -> None:
    from .reports import terminal_summary

    lines = run.selection.summary() + run.gates.notes()
    for nodeid, profile in run.profiler.session.tests.items():
        ab = profile.extra.get(extra_keys.AB)
        if isinstance(ab, dict) and "note" in ab:
            lines.append(f"{nodeid}: A/B against {ab['ref']}: {ab['note']}")
        if profile.outcome == "passed" and extra_keys.INSTRUCTIONS_MISSING in profile.extra:
            why = profile.extra[extra_keys.INSTRUCTIONS_MISSING]
            lines.append(f"{nodeid}: instructions not counted: {why}")
    lines += run.selection.reasons()
    if len(lines) > MAX_NOTES and not terminal_summary.wants_details(config):
        lines = [*lines[:MAX_NOTES], f"and {len(lines) - MAX_NOTES} more (-v shows them)"]
    if not lines:
        return
    terminalreporter.write_sep("-", "pytest-scalene gates")
    for line in lines:
        terminalreporter.write_line(line, red=line.startswith("ERROR"))
