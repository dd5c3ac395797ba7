"""Re-executes pytest with the allocator shim preloaded, so that memory can be profiled.

The shim must be loaded before the interpreter starts (LD_PRELOAD), so when memory profiling is
wanted and the shim is not in this process, the same command runs again through os.execve (same
pid, same file descriptors: stdin, stdout, stderr and capture are unchanged) with LD_PRELOAD
(the shim first, before any existing value). The re-executed process restores LD_PRELOAD at
once, so that the processes the tests start are not preloaded. A guard variable prevents loops.
PYTHONMALLOC is left alone: pymalloc stays (PYTHONMALLOC=malloc alone made allocation-heavy
suites 1.28x slower); the extension counts Python's arenas and raw allocations instead.
This runs first in pytest_load_initial_conftests, before capture starts and conftests load.
"""

from __future__ import annotations

import os
import platform
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pytest itself is imported only where needed: profiled children import this
    import pytest

GUARD = "PYTEST_SCALENE_REEXEC"
ORIGINAL_PREFIX = "PYTEST_SCALENE_ORIG_"
PRELOAD_VARS = ("LD_PRELOAD",)
SHIM_NAME = "libpytest_scalene_shim.so"

_unavailable: str | None = None


def shim_path() -> Path | None:
    """Where the shim is installed: next to the extension (also in editable installs)."""
    try:
        from . import _native
    except ImportError:
        return None
    return Path(_native.__file__).parent / SHIM_NAME


def shim_loaded() -> bool:
    try:
        from . import _native
    except ImportError:
        return False
    return bool(_native.shim_loaded())


_ALLOCATOR = re.compile(r"(jemalloc|tcmalloc|mimalloc|hoard|snmalloc|rpmalloc)", re.IGNORECASE)


def other_allocator() -> str | None:
    """The file name of an allocator the user preloaded (LD_PRELOAD as they set it), if any."""
    for entry in re.split(r"[:\s]+", os.environ.get("LD_PRELOAD", "")):
        if entry and entry != str(shim_path()) and _ALLOCATOR.search(Path(entry).name):
            return Path(entry).name
    return None


def unavailable_reason() -> str | None:
    """Why the shim is not active in this process, when a re-exec was wanted but not done."""
    return _unavailable


def restore_environment() -> bool:
    """In a re-executed process, put LD_PRELOAD back as it was. Returns
    whether this process was re-executed by us."""
    if os.environ.pop(GUARD, None) is None:
        return False
    for name in PRELOAD_VARS:
        original = os.environ.pop(ORIGINAL_PREFIX + name, None)
        if original is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = original
    return True


def _why_not(early_config: pytest.Config, reexecuted: bool) -> str | None:
    if not sys.platform.startswith("linux"):
        return f"the allocator shim needs Linux (LD_PRELOAD); this is {sys.platform}"
    if platform.libc_ver()[0] != "glibc":
        return "the allocator shim needs glibc (it forwards to glibc's malloc)"
    path = shim_path()
    if path is None:
        return "the pytest_scalene._native extension is not built"
    if not path.is_file():
        return f"the allocator shim {path} is missing (rebuild: pip install -e .)"
    if reexecuted:
        return f"pytest was re-executed with LD_PRELOAD={path} but the shim is not active"
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return "xdist workers cannot be re-executed; run without -n to profile memory"
    if not sys.executable or not getattr(sys, "orig_argv", None):
        return "the Python executable or its command line is unknown"
    if tuple(early_config.invocation_params.args) != tuple(sys.argv[1:]):
        return "pytest was started in-process (pytest.main()), so it cannot be re-executed"
    return None


def _reexecute(shim: Path) -> None:
    env = dict(os.environ)
    for name in PRELOAD_VARS:
        if name in env:
            env[ORIGINAL_PREFIX + name] = env[name]
    existing = env.get("LD_PRELOAD", "")
    env["LD_PRELOAD"] = f"{shim}:{existing}" if existing else str(shim)
    env[GUARD] = "1"
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    # sys.executable, not orig_argv[0]: Python finds its prefix (the venv) from argv[0].
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)


def prepare(early_config: pytest.Config) -> None:
    """Re-execute with the shim preloaded when memory profiling is wanted and the shim is
    missing. --profile-memory=yes makes an impossible preload a usage error; auto records why,
    for a note in the report."""
    global _unavailable
    reexecuted = restore_environment()
    ns: Any = early_config.known_args_namespace
    from .ini_options import resolve

    resolve(early_config, ns)  # the ini keys count here too (profile = true...)
    memory = getattr(ns, "profile_memory", "auto")
    # auto: whenever tests are profiled, baselines included (so that they hold memory figures).
    profiling = any(
        getattr(ns, name, False)
        for name in (
            "profile",
            "profile_save_baseline",
            "profile_compare",
            "profile_fail_on_leak",
            "profile_max_copy_mb_s",
        )
    )
    wanted = memory == "yes" or (memory == "auto" and profiling)
    if memory == "auto" and not wanted and not shim_loaded():
        from .memory_need import selected_need_memory  # plain pytest: memory budgets only

        wanted = selected_need_memory(early_config)
    if not wanted or shim_loaded():
        return
    reason = _why_not(early_config, reexecuted)
    if reason is None:
        path = shim_path()
        assert path is not None
        try:
            _reexecute(path)
        except OSError as exc:
            reason = f"re-executing pytest with the shim preloaded failed: {exc}"
    if memory == "yes":
        import pytest

        raise pytest.UsageError(f"--profile-memory=yes: {reason}")
    _unavailable = reason
