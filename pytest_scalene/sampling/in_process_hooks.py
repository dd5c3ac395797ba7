"""The allocator shim installed in the running process, without re-executing pytest.

The shim (native/shim.cpp) is loaded with dlopen and rewrites every loaded object's global
offset table entries for malloc & co. and the copy functions to its own, and dlopen's to a
wrapper that rewrites each object loaded later (native/got_hooks.cpp). So a memory profile
starts at the first test with no second interpreter start, and works where pytest cannot be
re-executed: pytest.main() (IDE runners, scripts) and xdist workers.

What only the preload sees (--profile-memory=preload re-executes pytest with LD_PRELOAD): calls
through a pointer to malloc taken before the install, and allocations before it (the footprint
is relative from the install on; the gates read it per test).
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
from pathlib import Path

from ..core import runenv

_library: ctypes.CDLL | None = None  # the shim, once loaded: never unloaded


def install(shim: Path) -> str | None:
    """Load `shim` (once) and install its hooks in this process; None, or why it could not."""
    global _library
    if installed():
        return None
    if not sys.platform.startswith("linux") or platform.machine() not in ("x86_64", "aarch64"):
        return f"in-process hooks need Linux on x86_64 or aarch64 (this is {platform.machine()})"
    library = _library
    if library is None:
        try:
            library = ctypes.CDLL(str(shim), mode=os.RTLD_NOW | os.RTLD_LOCAL)
        except OSError as exc:
            return f"loading the allocator shim failed: {exc}"
    found = library.pytest_scalene_hook_in_process(ctypes.c_void_p(library._handle))
    if found != 0:
        if _library is None:  # the extension must not find a shim that hooks nothing
            _dlclose(library._handle)
        return f"installing the allocator hooks in this process failed (code {found})"
    if _library is None:
        # Made global once installed: the extension finds the shim's API by name
        # (dlsym(RTLD_DEFAULT)). It comes after the process's allocator in the global scope,
        # so no object binds to its malloc by name, only through the rewritten entries.
        ctypes.CDLL(str(shim), mode=os.RTLD_NOW | os.RTLD_GLOBAL | os.RTLD_NOLOAD)
        _library = library
    runenv.set_shim_in_process(True)
    return None


def _dlclose(handle: int) -> None:
    import _ctypes

    _ctypes.dlclose(handle)


def uninstall() -> None:
    """Put every rewritten entry back (pytest.main() returned, the process goes on)."""
    if _library is not None and installed():
        _library.pytest_scalene_unhook_in_process()
        runenv.set_shim_in_process(False)


def installed() -> bool:
    return _library is not None and runenv.shim_loaded()


def hooked_entries() -> int:
    """How many entries are rewritten now (0 when not installed)."""
    return _library.pytest_scalene_hooked_slots() if _library is not None else 0
