"""core/after_fork.py: the plugin's fork() hooks run in every fork child, and hold their
functions weakly, so that the interpreter's exit can free each module's globals with the
module (held strongly, they outlived the modules and the exit's last collection walked them
all: +33 M instructions at the end of every profiling session)."""

from __future__ import annotations

import gc
import os
import subprocess
import sys

import pytest

from pytest_scalene.core import after_fork

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() is POSIX-only")


def test_a_registered_function_runs_in_a_fork_child():
    read_end, write_end = os.pipe()

    def tell_parent() -> None:
        os.write(write_end, b"ran")

    after_fork.run_in_fork_child(tell_parent)
    try:
        pid = os.fork()
        if pid == 0:  # the child: the hook has run by now
            os._exit(0)
        os.waitpid(pid, 0)
        os.close(write_end)
        assert os.read(read_end, 16) == b"ran"
    finally:
        os.close(read_end)
        del tell_parent
        gc.collect()


def test_a_function_is_held_weakly():
    namespace: dict = {}
    exec("def hook():\n    pass\n", namespace)
    after_fork.run_in_fork_child(namespace["hook"])
    held = after_fork._in_child[-1]
    assert held() is namespace["hook"]
    namespace.clear()  # its module's globals cleared, as the interpreter's exit does
    gc.collect()
    assert held() is None


# In a fresh interpreter: every fork hook the plugin registers, whatever the session imports.
REGISTERED = """
import os
found = []
real = os.register_at_fork
os.register_at_fork = lambda **hooks: found.extend(hooks.values()) or real(**hooks)
import pytest_scalene.plugin, pytest_scalene.profiling_session
from pytest_scalene.sampling import memory_sampler, signal_guard, resident
from pytest_scalene.subprocesses import child_agent
child_agent.install_fork_hook()
print(sorted({f.__module__ for f in found if f.__module__.startswith("pytest_scalene")}))
"""


def test_the_plugin_registers_its_fork_hooks_through_one_weak_hook(tmp_path):
    # A module-level function registered with os.register_at_fork directly keeps its module's
    # globals until the interpreter's very end (the exit's last collection walked 274 modules).
    # Run outside the checkout: `-c` puts the working directory first on sys.path, and the
    # checkout's package has no built extensions where the project was installed from it.
    done = subprocess.run(
        [sys.executable, "-c", REGISTERED], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['pytest_scalene.core.after_fork']"
