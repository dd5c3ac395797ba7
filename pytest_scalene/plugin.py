"""The pytest plugin `scalene` (the pytest11 entry point; `-p no:scalene` turns it off).

Every pytest session where the plugin is installed imports this module, profiling or not, so
it holds only what each session needs: the options, the markers, the shim's install where
memory is wanted, and the choice of whether the session profiles. A session that profiles gets
its run and hooks from profiling_session.py: at configure, where an option asks for
pytest-scalene or xdist distributes the tests (its controller collects nothing, yet receives
its workers' profiles); else after collection, where a selected test carries a perf_budget
marker. A plain session imports nothing more and runs no hook of ours per test; at its end it
looks whether a test got a perf_budget marker only while it ran, which it could not judge.
docs/architecture.md maps the package.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Generator

import pytest

from .benchmark import benchmark_fixture
from .config import ini_options, option_errors
from .config.options import EXIT_UNJUDGED, add_options
from .core import runenv
from .gates.memory_need import selected_need_memory
from .sampling import preload

PROFILES = pytest.StashKey[bool]()  # the session profiles: profiling_session.start() ran
# Tests that got a perf_budget marker only while they ran, in a session that did not profile
LATE_MARKED = pytest.StashKey[list[str]]()


# -- start-up ------------------------------------------------------------------------------------
def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    option_errors.check_flag_owner(parser, pluginmanager)
    add_options(parser)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser, args: list[str]
) -> Generator[None, None, None]:
    # Outermost, before capture starts and conftests load: may re-execute pytest with the
    # allocator shim preloaded (see sampling/preload.py).
    # A profiled child running pytest profiles itself: its agent (imported at the child's
    # start, and only there) stops.
    agent = sys.modules.get(f"{__package__}.subprocesses.child_agent")
    if agent is not None:
        agent.stop_for_nested_pytest()
    if not runenv.in_counting_session():
        preload.prepare(early_config, selected_need_memory)
    result = yield
    # pytest-benchmark's options where it is not installed; after the conftests, whose own
    # options of those names win.
    benchmark_fixture.add_options(parser, early_config.pluginmanager, args)
    return result


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{runenv.MARKER}(**limits): profile this test and fail it when a limit is exceeded "
        "(see pytest-scalene's docs/budgets.md)",
    )
    benchmark_fixture.register(config)  # where neither pytest-benchmark nor codspeed does
    if runenv.in_counting_session():
        from .instructions import child_plugin

        child_plugin.register(config)  # the child session under valgrind: no profiling here
        return
    ini_options.resolve(config, config.option)  # ini keys for what the command line left out
    option_errors.check_ini(config)  # a removed option's ini key says what replaces it
    if _profiles_from_the_start(config):
        from . import profiling_session

        profiling_session.start(config)
        config.stash[PROFILES] = True


def _profiles_from_the_start(config: pytest.Config) -> bool:
    """An option (or ini key) of ours is set; the session is an xdist controller (it collects
    nothing, yet receives its workers' profiles) or worker; or it is the code map's pre-pass
    at a git ref (selection/prepass.py), which records every test."""
    return (
        ini_options.any_set(config.option)
        or getattr(config.option, "dist", "no") != "no"
        or runenv.is_xdist_worker(config)
        or runenv.RECORD_ENV in os.environ
    )


@pytest.hookimpl(trylast=True)  # after other plugins deselect
def pytest_collection_finish(session: pytest.Session) -> None:
    config = session.config
    if runenv.in_counting_session():
        return
    profiles = config.stash.get(PROFILES, False)
    if not profiles and not runenv.marked(session.items):
        return  # a plain session: nothing of ours per test
    from . import profiling_session

    if profiles:
        run = config.stash[profiling_session.RUN_KEY]
    else:
        run = profiling_session.start(config, after_sessionstart=True)
        config.stash[PROFILES] = True
    profiling_session.after_collection(session, run)


# -- a marker that came too late -----------------------------------------------------------------
def pytest_sessionfinish(session: pytest.Session) -> None:
    """A perf_budget marker added while the tests ran (a fixture's add_marker), in a session
    that found none at collection and had no option of ours, so did not profile: that budget
    was never judged, and the run must not pass as if it had been. (With any option of ours
    the session profiles, and judges such a test.)"""
    config = session.config
    if config.stash.get(PROFILES, False) or runenv.in_counting_session():
        return
    # session.items is absent where collection did not finish
    marked = [item.nodeid for item in runenv.marked(getattr(session, "items", ()))]
    if not marked:
        return
    config.stash[LATE_MARKED] = marked
    if session.exitstatus == 0:
        session.exitstatus = EXIT_UNJUDGED


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    marked = config.stash.get(LATE_MARKED, [])
    if not marked:
        return
    terminalreporter.write_sep("-", "pytest-scalene: not judged", red=True)
    lines = [
        f"{len(marked)} test(s) got a perf_budget marker while they ran (a fixture's "
        "add_marker?), after collection found none, so this session did not profile and "
        "their budgets were not judged:",
        *(f"  {nodeid}" for nodeid in marked[:10]),
        *([f"  and {len(marked) - 10} more"] if len(marked) > 10 else []),
        "Mark them at collection (a decorator, pytestmark, a conftest's "
        "pytest_collection_modifyitems) or run with --profile; until then the run fails "
        f"with exit status {EXIT_UNJUDGED}.",
    ]
    for line in lines:
        terminalreporter.write_line(line, red=True)
