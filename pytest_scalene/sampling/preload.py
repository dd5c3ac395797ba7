"""Puts the allocator shim in the pytest process when memory is to be profiled.

By default the shim is installed in the running process (in_process_hooks.py): no second
interpreter start, and it works under pytest.main() and in xdist workers. Where that fails, or
with --profile-memory=preload, the shim is preloaded instead: the same command runs again
through os.execve (same pid, same file descriptors: stdin, stdout, stderr and capture are
unchanged) with LD_PRELOAD (the shim first, before any existing value). The re-executed process
restores LD_PRELOAD at once, so that the processes the tests start are not preloaded. A guard
variable prevents loops. The preload also sees allocations made through a pointer to malloc
taken before the install.
PYTHONMALLOC is left alone: pymalloc stays (PYTHONMALLOC=malloc alone made allocation-heavy
suites 1.28x slower); the extension counts Python's arenas and raw allocations instead.
This runs first in pytest_load_initial_conftests, before capture starts and conftests load.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core import runenv

if TYPE_CHECKING:  # pytest itself is imported only where needed: profiled children import this
    import pytest


def _no_shim() -> str | None:
    """Why the shim cannot be used here at all, or None."""
    if not sys.platform.startswith("linux"):
        return f"the allocator shim needs Linux; this is {sys.platform}"
    if platform.libc_ver()[0] != "glibc":
        return "the allocator shim needs glibc (it forwards to glibc's malloc)"
    path = runenv.shim_path()
    if path is None:
        return "the pytest_scalene._native extension is not built"
    if not path.is_file():
        return f"the allocator shim {path} is missing (rebuild: pip install -e .)"
    return None


def _why_not(early_config: pytest.Config, reexecuted: bool) -> str | None:
    """Why pytest cannot be re-executed with the shim preloaded, or None."""
    if reexecuted:
        shim = runenv.shim_path()
        return f"pytest was re-executed with LD_PRELOAD={shim} but the shim is not active"
    if runenv.in_xdist_worker_process():
        return "xdist workers cannot be re-executed; run without -n to profile memory"
    if not sys.executable or not getattr(sys, "orig_argv", None):
        return "the Python executable or its command line is unknown"
    if tuple(early_config.invocation_params.args) != tuple(sys.argv[1:]):
        return "pytest was started in-process (pytest.main()), so it cannot be re-executed"
    return None


def _reexecute(shim: Path) -> None:
    env = dict(os.environ)
    env.update(runenv.preload_overlay(str(shim), env))
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    # sys.executable, not orig_argv[0]: Python finds its prefix (the venv) from argv[0].
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)


def prepare(early_config: pytest.Config, needs_memory: Callable[[Any], bool]) -> None:
    """Install the shim when memory profiling is wanted and it is missing (the module doc);
    without a profiling option, when `needs_memory` (gates/memory_need.py) finds a memory
    budget among the selected tests. --profile-memory=yes (or preload) makes a shim that cannot
    be had a usage error; auto records why, for a note in the report."""
    reexecuted = runenv.restore_environment()
    ns: Any = early_config.known_args_namespace
    from ..config.ini_options import resolve

    resolve(early_config, ns)  # the ini keys count here too (profile = true...)
    memory = getattr(ns, "profile_memory", "auto")
    # auto: whenever tests are profiled, baselines included (so that they hold memory figures).
    profiling = runenv.profiling_requested(ns)
    wanted = memory in ("yes", "preload") or (memory == "auto" and profiling)
    if memory == "auto" and not wanted:
        wanted = needs_memory(early_config)  # plain pytest: memory budgets only
    if not wanted or runenv.shim_loaded():  # asked last: it imports the extension
        return
    from . import in_process_hooks  # ctypes: only where the shim is wanted

    reason = _no_shim()
    path = runenv.shim_path()
    if reason is None and path is not None:
        if memory != "preload" and not reexecuted:
            reason = in_process_hooks.install(path)
            if reason is None:
                early_config.add_cleanup(in_process_hooks.uninstall)  # pytest.main() returns
                return
        cannot = _why_not(early_config, reexecuted)
        if cannot is None:
            try:
                _reexecute(path)  # does not return
            except OSError as exc:
                cannot = f"re-executing pytest with the shim preloaded failed: {exc}"
        reason = cannot if reason is None else f"{reason}, and {cannot}"
    if memory in ("yes", "preload"):
        import pytest

        raise pytest.UsageError(f"--profile-memory={memory}: {reason}")
    runenv.record_shim_problem(reason)
