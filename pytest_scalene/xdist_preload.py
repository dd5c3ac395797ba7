"""pytest-xdist: start the workers with the allocator shim preloaded when the controller has it.

A worker cannot re-execute itself (execnet talks to it through pipes its bootstrap set up), so
without this, `-n 2 --profile` profiled no memory and a memory budget that passes without xdist
failed as "cannot be checked". The controller sets the variables preload._reexecute sets only
while xdist starts its workers (DSession.pytest_sessionstart), then puts them back: each worker
restores its own environment at once (preload.restore_environment), so the processes tests
start are not preloaded. A worker that xdist restarts after a crash starts later, without the
shim; it profiles CPU only and its report says why.
"""

from __future__ import annotations

import os
from collections.abc import Generator

import pytest

from . import preload


def worker_environment(shim: str, environ: dict[str, str]) -> dict[str, str]:
    """The variables to set so that a new worker starts preloaded and undoes it itself."""
    overlay = {preload.GUARD: "1"}
    for name in preload.PRELOAD_VARS:
        if name in environ:
            overlay[preload.ORIGINAL_PREFIX + name] = environ[name]
    existing = environ.get("LD_PRELOAD", "")
    overlay["LD_PRELOAD"] = f"{shim}:{existing}" if existing else shim
    return overlay


class XdistPreload:
    """Registered on the controller only; acts only when xdist starts workers and the shim is in."""

    @pytest.hookimpl(hookwrapper=True)
    def pytest_sessionstart(self, session: pytest.Session) -> Generator[None, None, None]:
        path = preload.shim_path()
        config = session.config
        if (
            path is None
            or not config.pluginmanager.has_plugin("dsession")
            or not preload.shim_loaded()
        ):
            yield
            return
        overlay = worker_environment(str(path), dict(os.environ))
        saved = {name: os.environ.get(name) for name in overlay}
        os.environ.update(overlay)
        try:
            yield
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
