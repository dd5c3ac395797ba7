"""pytest-xdist: start the workers with the allocator shim preloaded when the controller has it
preloaded (--profile-memory=preload); otherwise each worker installs it in its own process
(sampling/in_process_hooks.py), a worker that xdist restarts included.

A worker cannot re-execute itself (execnet talks to it through pipes its bootstrap set up), so
without this, `-n 2 --profile` profiled no memory and a memory budget that passes without xdist
failed as "cannot be checked". The controller sets the variables that a re-exec sets
(runenv.preload_overlay) only while xdist starts its workers (DSession.pytest_sessionstart), then
puts them back: each worker restores its own environment at once (runenv.restore_environment),
so the processes tests start are not preloaded. A worker that xdist restarts after a crash
starts later, without the shim; it profiles CPU only and its report says why.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import pytest

from ..core import runenv


@contextlib.contextmanager
def preloaded_workers(config: pytest.Config) -> Iterator[None]:
    """Around pytest_sessionstart on the controller (profiling_session.py): while xdist starts
    its workers, the environment starts them with the shim; acts only with xdist and the shim in
    this process."""
    # xdist first: the other checks import the extension and ctypes, which a session without
    # xdist and without memory profiling does without.
    if not config.pluginmanager.has_plugin("dsession"):
        yield
        return
    from ..sampling import in_process_hooks

    path = runenv.shim_path()
    if path is None or not runenv.shim_loaded() or in_process_hooks.installed():
        yield
        return
    overlay = runenv.preload_overlay(str(path), dict(os.environ))
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
