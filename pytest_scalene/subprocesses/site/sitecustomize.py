"""pytest-scalene --profile-subprocesses: this directory is put first on PYTHONPATH for the
processes a profiled test starts, so that Python imports this file at startup (site.py).

It first runs the sitecustomize that would have run without it (the next one on sys.path),
then lets the child profile itself (pytest_scalene.subprocesses.child_agent). Nothing here may
break the child: a Python that cannot import pytest_scalene just runs unprofiled.
"""

import os
import sys
from importlib.machinery import PathFinder


def _chain() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    from importlib.util import module_from_spec  # only now: it costs a child ~15 ms of imports

    module = module_from_spec(spec)
    sys.modules[__name__] = module
    spec.loader.exec_module(module)


def _profile_this_process() -> None:
    if not os.environ.get("PYTEST_SCALENE_CHILD"):
        return
    try:
        from pytest_scalene.subprocesses import child_agent
    except Exception:  # another Python, or the plugin is not installed there
        return
    child_agent.start_from_env()


try:
    _chain()
finally:
    _profile_this_process()
