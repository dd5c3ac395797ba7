"""A baseline save killed at any moment (SIGKILL: a CI job's timeout, an OOM kill) leaves no
temporary file where `git add baselines/` would pick it up; the next save removes what it left."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_scalene.core.atomic_write import SCRATCH_FOLDER, scratch_folder
from pytest_scalene.gates import baseline_store as store
from pytest_scalene.gates.baseline_store import LineEntry, TestEntry

# Saves a module baseline again and again on a slow disk (each fsync takes 50 ms, as on a busy
# CI runner), so that most kills land while a temporary file exists.
SAVING_FOREVER = """
import os, sys, time
from pytest_scalene.gates import baseline_store as store
from pytest_scalene.gates.baseline_store import LineEntry, TestEntry

real_fsync = os.fsync
os.fsync = lambda fd: (time.sleep(0.05), real_fsync(fd))
module = "tests/test_big.py"
lines = tuple(LineEntry(module, f"f{i}", i, "x = 1", i, {"cpu_s": 0.001 * i}) for i in range(50))
entries = {f"{module}::test_{k}": TestEntry({"cpu_s": 1.0 + k}, lines) for k in range(3)}
print("ready", flush=True)
while True:
    store.save(sys.argv[1], entries, 0.01, "cpu", 1)
"""

KILLS = 10


def _untracked(repo: Path) -> list[str]:
    """What `git add -A` would stage now."""
    done = subprocess.run(
        ["git", "add", "-A", "--dry-run"], cwd=repo, capture_output=True, text=True, check=True
    )
    return [line.split(" ", 1)[1].strip("'") for line in done.stdout.splitlines()]


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_killed_save_leaves_nothing_for_git_add(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    baselines = repo / "baselines"
    script = tmp_path / "save_forever.py"
    script.write_text(SAVING_FOREVER)
    left_mid_save = 0
    for kill in range(KILLS):
        saver = subprocess.Popen(
            [sys.executable, str(script), str(baselines)], stdout=subprocess.PIPE, text=True
        )
        assert saver.stdout is not None and saver.stdout.readline().strip() == "ready"
        time.sleep(0.2 + 0.0137 * kill)  # a different moment of the save each time
        saver.send_signal(signal.SIGKILL)
        saver.wait()
        staged = _untracked(repo)
        assert staged in ([], ["baselines/tests/test_big.py.json"]), staged
        left_mid_save += any((baselines / SCRATCH_FOLDER).glob(".*.tmp"))
    # The kills did land mid-write (else this test proves nothing), and the next save sweeps.
    assert left_mid_save >= KILLS // 2, f"only {left_mid_save} kills landed mid-write"
    entry = TestEntry({"cpu_s": 1.0}, (LineEntry("tests/test_big.py", "f", 1, "x", 1, {}),))
    store.save(baselines, {"tests/test_big.py::test_0": entry}, 0.01, "cpu", 1)
    assert not (baselines / SCRATCH_FOLDER).exists()  # a save that ends removes the folder
    assert _untracked(repo) == ["baselines/tests/test_big.py.json"]


def test_the_scratch_folders_gitignore_appears_whole_or_not_at_all(tmp_path, monkeypatch):
    # A save killed between creating the .gitignore and writing it left an empty one, which
    # ignores nothing: `git add baselines/` staged it (1 run in ~10 of the test above).
    def killed(fd: int, data: bytes) -> int:
        raise KeyboardInterrupt  # the process dies here, its file created, nothing written

    monkeypatch.setattr(os, "write", killed)
    with pytest.raises(KeyboardInterrupt):
        scratch_folder(tmp_path)
    assert not (tmp_path / SCRATCH_FOLDER / ".gitignore").exists()
    monkeypatch.undo()
    folder = scratch_folder(tmp_path)
    assert (folder / ".gitignore").read_text().startswith("*\n")
