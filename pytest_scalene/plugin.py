"""pytest hooks: option parsing, profiling around each test call, reports at the end."""

from __future__ import annotations

from collections.abc import Generator

import pytest

from . import flag_conflicts, terminal_report
from .json_report import write_json
from .options import ProfileOptions, add_options
from .profiler import Profiler

PROFILER_KEY = pytest.StashKey[Profiler]()
BUDGET_MARKER = "perf_budget"


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    flag_conflicts.check(parser, pluginmanager)
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{BUDGET_MARKER}(**limits): profile this test and fail it when a limit is exceeded "
        "(see pytest-scalene's docs/budgets.md)",
    )
    options = ProfileOptions.from_config(config)
    config.stash[PROFILER_KEY] = Profiler(options, str(config.rootpath))


def _wants_profile(item: pytest.Item, profiler: Profiler) -> bool:
    return profiler.options.enabled or item.get_closest_marker(BUDGET_MARKER) is not None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    profiler = item.config.stash.get(PROFILER_KEY, None)
    if profiler is None or not _wants_profile(item, profiler):
        return (yield)
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


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:  # noqa: ANN001
    profiler = config.stash.get(PROFILER_KEY, None)
    if profiler is None or not profiler.session.tests:
        return
    terminalreporter.write_sep("=", "pytest-scalene profile")
    text = terminal_report.render(profiler.session, str(config.rootpath), profiler.options.top)
    terminalreporter.write_line(text)


def pytest_sessionfinish(session: pytest.Session) -> None:
    profiler = session.config.stash.get(PROFILER_KEY, None)
    if profiler is None or profiler.options.json_path is None:
        return
    write_json(profiler.session, profiler.options.json_path)
