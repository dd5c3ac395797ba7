"""Facts about the run that several layers need, derived in one place: whether this process is an
xdist worker, whether the allocator shim is here (memory profiling possible) and why not, whether
the command line asks for profiling, the interpreter's identity, and the LD_PRELOAD variables that
start a process with the shim and let it undo them.

Plain Python, no pytest import: profiled children (subprocesses/child_agent.py) import this too.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

MARKER = "perf_budget"  # the marker that asks for a test to be profiled (gates/budgets.py)
COUNTING_ENV = "PYTEST_SCALENE_COUNTING"  # the child session under valgrind: the plugin is inert
WORKER_ENV = "PYTEST_XDIST_WORKER"  # set by pytest-xdist in its worker processes
# The code map's pre-pass session at a git ref (selection/prepass.py): its map is written here
RECORD_ENV = "PYTEST_SCALENE_RECORD_CODE_MAP"
GUARD = "PYTEST_SCALENE_REEXEC"  # set in a process started preloaded; removed by it at once
ORIGINAL_PREFIX = "PYTEST_SCALENE_ORIG_"  # the user's value, put back by restore_environment
PRELOAD_VARS = ("LD_PRELOAD",)
SHIM_NAME = "libpytest_scalene_shim.so"
# The options that profile every test, not only the budgeted ones: one list, read by the
# options (ProfileOptions.enabled) and by the early decision to install the memory shim.
PROFILE_EVERY_TEST = (
    "profile",
    "profile_save_baseline",
    "profile_compare",
    "profile_compare_history",
    "profile_compare_ref",
)
# --profile-budget may limit memory figures of every profiled test: the shim is wanted with it
# (with a limit on another figure too: the options cannot tell the keywords' figures apart here).
BUDGET_OPTIONS = ("profile_budget",)

_shim_problem: str | None = None


def has_marker(item: Any) -> bool:
    """Whether a perf_budget marker may apply to the pytest `item`. Its keywords hold the names
    of its own markers and, through its parents' keywords, theirs (pytest adds a marker to both,
    at collection and in add_marker): a few dict reads, where iter_markers walks the node chain
    and each node's markers (16 k instructions a test, paid by every test of a suite). False
    means no marker; True, a marker or a keyword of that name (iter_markers then tells)."""
    return MARKER in item.keywords


def marked(items: Iterable[Any]) -> list[Any]:
    """The `items` that a perf_budget marker applies to (iter_markers would find one), in
    their order: each node's own markers, its parents' read once for all their tests. Over a
    whole suite at once (collection's end, the session's) this is ~3 k instructions a test on
    Python 3.12, where has_marker's look-up through each test's parents was ~6 k."""
    above: dict[int, bool] = {}  # id(node) -> a marker on it or above it

    def on_or_above(node: Any) -> bool:
        if node is None:
            return False
        known = above.get(id(node))  # ids: a node's hash is a Python call
        if known is None:
            known = above[id(node)] = _own_marker(node) or on_or_above(node.parent)
        return known

    found = []
    for item in items:
        known = above.get(id(item.parent))  # most tests: their parent's answer, known
        if known is None:
            known = on_or_above(item.parent)
        if known or _own_marker(item):
            found.append(item)
    return found


def _own_marker(node: Any) -> bool:
    for mark in node.own_markers:  # noqa: SIM110 (any() makes a generator, once a test)
        if mark.name == MARKER:
            return True
    return False


def interpreter() -> str:
    """The interpreter that instruction counts and code maps depend on: implementation, version
    and build. (The history's machine names major.minor only: timings compare across patches.)"""
    return f"{sys.implementation.name} {sys.version}"


def is_xdist_worker(config: Any) -> bool:
    """This pytest session is an xdist worker (its profiles go to the controller)."""
    return hasattr(config, "workerinput")


def in_xdist_worker_process() -> bool:
    """This process was started by xdist as a worker (known before any config exists)."""
    return bool(os.environ.get(WORKER_ENV))


def is_xdist_controller(config: Any) -> bool:
    return getattr(config.option, "dist", "no") != "no"


def in_counting_session() -> bool:
    """This is the child session that counts instructions under valgrind: no profiling here."""
    return bool(os.environ.get(COUNTING_ENV))


def profiling_requested(namespace: Any) -> bool:
    """The command line (or ini) profiles every test, or asks for a memory gate."""
    return any(getattr(namespace, name, None) for name in PROFILE_EVERY_TEST + BUDGET_OPTIONS)


def shim_path() -> Path | None:
    """Where the shim is installed: next to the extension (also in editable installs)."""
    try:
        from .. import _native
    except ImportError:
        return None
    return Path(_native.__file__).parent / SHIM_NAME


# Whether the shim's hooks are in, where sampling/in_process_hooks.py loaded it (None: it did
# not; the shim, if any, was preloaded). Once loaded the shim stays, unhooked after pytest.main()
# returns: the extension still finds it, yet it sees no allocation until installed again.
_in_process: bool | None = None


def set_shim_in_process(hooked: bool) -> None:
    global _in_process
    _in_process = hooked


def shim_loaded() -> bool:
    """Whether the shim sees this process's allocations: preloaded, or hooked in."""
    if _in_process is not None:
        return _in_process
    try:
        from .. import _native

        return bool(_native.shim_loaded())
    except Exception:  # no extension built, or an older one: memory profiling is not there
        return False


_ALLOCATOR = r"(?i)(jemalloc|tcmalloc|mimalloc|hoard|snmalloc|rpmalloc)"  # compiled at first use


def other_allocator() -> str | None:
    """The file name of an allocator the user preloaded (LD_PRELOAD as they set it), if any."""
    for entry in re.split(r"[:\s]+", os.environ.get("LD_PRELOAD", "")):
        if entry and entry != str(shim_path()) and re.search(_ALLOCATOR, Path(entry).name):
            return Path(entry).name
    return None


def record_shim_problem(reason: str | None) -> None:
    """sampling/preload.py: why a wanted preload did not happen, for the reports."""
    global _shim_problem
    _shim_problem = reason


def shim_problem() -> str | None:
    """Why the shim is not active in this process, when a re-exec was wanted but not done."""
    return _shim_problem


def memory_unavailable(memory_option: str) -> str | None:
    """Why memory cannot be profiled in this run, or None when it can."""
    if memory_option == "no":
        return "--profile-memory=no"
    if shim_loaded():
        return None
    return _shim_problem or (
        "the memory shim is not in this process; pytest-scalene installs it when run with "
        "--profile or --profile-memory=yes"
    )


def preload_overlay(shim: str, environ: dict[str, str]) -> dict[str, str]:
    """The variables that start a process with the shim preloaded (the shim first, before any
    existing value) and tell it what to put back (restore_environment)."""
    overlay = {GUARD: "1"}
    for name in PRELOAD_VARS:
        if name in environ:
            overlay[ORIGINAL_PREFIX + name] = environ[name]
    existing = environ.get("LD_PRELOAD", "")
    overlay["LD_PRELOAD"] = f"{shim}:{existing}" if existing else shim
    return overlay


def restore_environment() -> bool:
    """In a process started with preload_overlay, put LD_PRELOAD back as it was. Returns whether
    this process was started so."""
    if os.environ.pop(GUARD, None) is None:
        return False
    for name in PRELOAD_VARS:
        original = os.environ.pop(ORIGINAL_PREFIX + name, None)
        if original is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = original
    return True
