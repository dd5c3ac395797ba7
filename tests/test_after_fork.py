"""core/after_fork.py: the plugin's fork() hooks run in every fork child, and hold their
functions weakly, so that the interpreter's exit can free each module's globals with the
module (held strongly, they outlived the modules and the exit's last collection walked them
all: +33 M instructions at the end of every profiling session)."""

from __future__ import annotations

import gc
import os

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
