"""Functions to run in a fork() child: registered with os.register_at_fork once for all of
them, and held weakly.

A function registered there directly is referenced until the interpreter's very end, and
with it its module's globals, past the point where the exit clears the modules: the exit's
last collection then walked them all (+33 M instructions at the end of every profiling
session, a quarter of its start-up's extra). Held weakly, a module-level function goes with
its module, as it would without us."""

from __future__ import annotations

import sys
from collections.abc import Callable
from weakref import ref

_in_child: list[ref[Callable[[], None]]] = []


def _run_in_child() -> None:
    for weak in list(_in_child):
        function = weak()
        if function is None:
            continue
        try:
            function()
        except Exception as exc:  # one failing must not keep the others from running
            print(f"pytest-scalene: after fork: {exc!r}", file=sys.stderr)


def run_in_fork_child(function: Callable[[], None]) -> None:
    """Run `function`, a module-level function (it is held weakly), in every fork() child."""
    if not _in_child:
        import os

        if not hasattr(os, "register_at_fork"):
            return
        os.register_at_fork(after_in_child=_run_in_child)
    _in_child.append(ref(function))
