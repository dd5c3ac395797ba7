"""pytest hooks: option parsing, profiling around each test call, reports at the end."""

from __future__ import annotations

import json
import os
from collections.abc import Generator
from pathlib import Path

import pytest

from . import (
    child_agent,
    child_profiles,
    flag_conflicts,
    ini_options,
    json_checkpoint,
    memory_sampler,
    preload,
    terminal_report,
    terminal_summary,
    xdist_relay,
)
from .ab import plugin as ab_plugin
from .gate_hooks import PLUGIN_NAME, GatePlugin
from .gpu_sampler import GpuSetup
from .history.options import HistoryOptions
from .history.pytest_plugin import PLUGIN_NAME as HISTORY_PLUGIN_NAME
from .history.pytest_plugin import HistoryPlugin
from .html_report import write_html
from .instructions import child_plugin, counts, runner
from .json_report import write_json
from .options import GateOptions, ProfileOptions, add_options
from .profiler import Profiler
from .speedscope_export import write_speedscope
from .stack_recorder import StackRecorder
from .xdist_preload import XdistPreload

PROFILER_KEY = pytest.StashKey[Profiler]()
GPU_KEY = pytest.StashKey[GpuSetup]()
STACKS_KEY = pytest.StashKey[StackRecorder]()
STACKS_OUTPUT_KEY = "pytest_scalene_stacks"  # a worker's stacks, in xdist's workeroutput
BUDGET_MARKER = "perf_budget"
XDIST_PRELOAD_NAME = "pytest_scalene_xdist_preload"


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    flag_conflicts.check(parser, pluginmanager)
    add_options(parser)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> Generator[None, None, None]:
    # Outermost, before capture starts and conftests load: may re-execute pytest with the
    # allocator shim preloaded (see preload.py).
    child_agent.stop_for_nested_pytest()  # a profiled child running pytest: it profiles itself
    if not _counting_session():
        preload.prepare(early_config)
    return (yield)


def _counting_session() -> bool:
    """This is the child session that counts instructions under valgrind: no profiling here."""
    return bool(os.environ.get(runner.COUNTING_ENV))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{BUDGET_MARKER}(**limits): profile this test and fail it when a limit is exceeded "
        "(see pytest-scalene's docs/budgets.md)",
    )
    if _counting_session():
        child_plugin.register(config)
        return
    ini_options.resolve(config, config.option)  # ini keys for what the command line left out
    options = ProfileOptions.from_config(config)
    config.stash[PROFILER_KEY] = profiler = Profiler(options, str(config.rootpath))
    memory_sampler.attach(profiler, config.add_cleanup)  # memory, leaks, copy: with the shim
    child_profiles.attach(profiler, config.add_cleanup)  # --profile-subprocesses
    json_checkpoint.install(config, profiler.session, options.json_path)  # crash-safe JSON
    xdist_relay.install(config, profiler.session)  # a crashed xdist worker loses one test
    gate_options = GateOptions.from_config(config)
    if gate_options.measure == "instructions" and (problem := runner.problem()) is not None:
        raise pytest.UsageError(f"--profile-measure=instructions: {problem}")
    instructions = counts.InstructionCounts(config, profiler, gate_options.measure)
    config.pluginmanager.register(instructions, counts.PLUGIN_NAME)  # valgrind, when needed
    if gate_options.compare_ref and not hasattr(config, "workerinput"):
        setup = ab_plugin.check(config, gate_options.compare_ref)  # a bad ref: a usage error
        ab = ab_plugin.CompareRef(config, profiler, setup)
        config.pluginmanager.register(ab, ab_plugin.PLUGIN_NAME)  # A/B runs after collection
    gates = GatePlugin(config, profiler, gate_options)
    config.pluginmanager.register(gates, PLUGIN_NAME)  # budgets, baselines, CI outputs, xdist
    history = HistoryOptions.from_config(config)
    if history.url:  # after the gates: see history/pytest_plugin.py
        config.pluginmanager.register(HistoryPlugin(config, profiler, history), HISTORY_PLUGIN_NAME)
    if not hasattr(config, "workerinput"):  # xdist controller: workers start preloaded too
        config.pluginmanager.register(XdistPreload(), XDIST_PRELOAD_NAME)
    gpu = config.stash[GPU_KEY] = GpuSetup(profiler)
    config.add_cleanup(gpu.close)
    if options.gpu == "yes":
        gpu.ensure()  # a missing GPU is a usage error now, not at the first profiled test
    if options.speedscope_path is not None:  # stacks cost a walk per sample: only when asked
        recorder = config.stash[STACKS_KEY] = StackRecorder(profiler.scope)
        profiler.listeners.append(recorder)


def _wants_profile(item: pytest.Item, profiler: Profiler) -> bool:
    return profiler.options.enabled or item.get_closest_marker(BUDGET_MARKER) is not None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    profiler = item.config.stash.get(PROFILER_KEY, None)
    if profiler is None or not _wants_profile(item, profiler):
        return (yield)
    item.config.stash[GPU_KEY].ensure()  # loads NVML once, at the first profiled test
    with profiler.profiling(item.nodeid):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    profiler = item.config.stash.get(PROFILER_KEY, None)
    profile = profiler.session.tests.get(item.nodeid) if profiler else None
    # The profile's outcome is the test's: failed if any phase failed, else the call's outcome.
    phase_decides = report.when == "call" or report.failed
    if profile is not None and phase_decides and profile.outcome != "failed":
        profile.outcome = report.outcome
    return report


@pytest.hookimpl(trylast=True)  # last, so that the errors end the output
def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:  # noqa: ANN001
    profiler = config.stash.get(PROFILER_KEY, None)
    if profiler is None:
        return
    if profiler.session.tests:
        terminalreporter.write_sep("=", "pytest-scalene profile")
        rootdir = str(config.rootpath)
        if terminal_summary.wants_details(config):
            text = terminal_report.render(profiler.session, rootdir, profiler.options.top)
        else:
            text = terminal_summary.render_summary(profiler.session, rootdir)
        terminalreporter.write_line(text)
    gates = config.pluginmanager.get_plugin(PLUGIN_NAME)
    gate_lines = getattr(gates, "summary", [])
    errors = profiler.errors + [ln for ln in gate_lines if ln.startswith("ERROR")]
    if errors:  # repeated here, next to the final status line, however long the report
        terminalreporter.write_sep("-", "pytest-scalene errors", red=True)
        for line in errors:
            terminalreporter.write_line(line, red=True, bold=True)


def _write_report_files(session: pytest.Session, profiler: Profiler) -> None:
    """--profile-html and --profile-speedscope. A file that cannot be written fails the run with
    a one-line error (CI wants the artifact), never a traceback."""
    config = session.config
    options = profiler.options
    recorder = config.stash.get(STACKS_KEY, None)
    for option, path in (
        ("--profile-html", options.html_path),
        ("--profile-speedscope", options.speedscope_path),
    ):
        if path is None:
            continue
        try:
            if option == "--profile-html":
                write_html(profiler.session, path, str(config.rootpath))
            elif recorder is not None:
                write_speedscope(profiler.session, recorder, path)
        except OSError as exc:
            _report_unwritable(session, profiler, option, path, exc)


def _report_unwritable(
    session: pytest.Session, profiler: Profiler, option: str, path: Path, exc: OSError
) -> None:
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    message = f"pytest-scalene: cannot write {option} file {path}: {exc.strerror or exc}"
    if reporter is not None:
        reporter.ensure_newline()  # not glued to the progress line
        reporter.write_line(message, red=True, bold=True)
    profiler.errors.append(f"ERROR {message}")  # repeated at the end of the output
    session.exitstatus = pytest.ExitCode.INTERNAL_ERROR


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:  # noqa: ANN001
    """pytest-xdist, on the controller: add a worker's stacks to the controller's recorder."""
    recorder = node.config.stash.get(STACKS_KEY, None)
    text = (getattr(node, "workeroutput", None) or {}).get(STACKS_OUTPUT_KEY)
    if recorder is not None and text:
        recorder.merge_payload(json.loads(text))


def pytest_sessionfinish(session: pytest.Session) -> None:
    profiler = session.config.stash.get(PROFILER_KEY, None)
    recorder = session.config.stash.get(STACKS_KEY, None)
    if hasattr(session.config, "workerinput"):  # on xdist, the controller writes the files
        if recorder is not None:
            session.config.workeroutput[STACKS_OUTPUT_KEY] = json.dumps(recorder.to_payload())
    elif profiler is not None:
        _write_report_files(session, profiler)
    if profiler is None or profiler.options.json_path is None:
        return
    if hasattr(session.config, "workerinput"):
        return  # an xdist worker: its profiles go to the controller, which writes the file
    try:
        write_json(profiler.session, profiler.options.json_path)
    except OSError as exc:
        _report_unwritable(session, profiler, "--profile-json", profiler.options.json_path, exc)
