"""The A/B comparison with no stored code map: one plain run of the tests at REF, in a git
worktree, that only records their map (no profiling, no measuring). The map then decides which
tests the comparison measures, and is stored for the next run."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from ..compare_ref import git_tree
from ..compare_ref.ab_run import Setup, ini_args_for
from ..core.runenv import RECORD_ENV
from ..instructions.runner import pytest_launcher
from .code_map import CodeMap, CodeMapError, load

TIMEOUT_S = 3600.0


def record_at_ref(setup: Setup, nodeids: list[str]) -> tuple[CodeMap | None, str]:
    """The tests' map at REF, or None and why not."""
    files = sorted({nodeid.split("::", 1)[0] for nodeid in nodeids})
    with tempfile.TemporaryDirectory(prefix="pytest-scalene-map-") as scratch:
        out = Path(scratch) / "code-map.json"
        try:
            with git_tree.Worktree(setup.root, setup.commit) as tree:
                rootdir = tree / setup.rootdir.relative_to(setup.root)
                present = [f for f in files if (rootdir / f.split("[", 1)[0]).exists()]
                if not present:
                    return None, f"none of the tests' files exist at {setup.ref}"
                command = [
                    sys.executable,
                    *pytest_launcher(),
                    *ini_args_for(setup, tree),
                    *setup.args,
                    "-p",
                    "no:cacheprovider",
                    "-q",
                    "--rootdir",
                    str(rootdir),
                    *present,
                ]
                env = {**os.environ, RECORD_ENV: str(out)}
                subprocess.run(
                    command,
                    cwd=rootdir,
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    timeout=TIMEOUT_S,
                    check=False,  # failing tests still have a map
                )
        except (git_tree.GitError, OSError, subprocess.TimeoutExpired) as exc:
            return None, f"recording the code map at {setup.ref} failed ({exc})"
        try:
            found = load(out)
        except CodeMapError as exc:
            return None, f"the code map recorded at {setup.ref} is unreadable ({exc})"
        if found is None:
            return None, f"the run at {setup.ref} recorded no code map (did it collect tests?)"
        return found, ""
