"""What --profile-subprocesses costs a test's children, and that without it they cost nothing.

Runs one sample test under plain pytest, --profile, and --profile --profile-subprocesses (with
and without memory), interleaved for ROUNDS rounds. The test times, from the parent, the start
and exit of trivial Python children (subprocess and multiprocessing spawn), and each child
times a fixed pure-Python workload itself (subprocess, fork, spawn). Prints medians as a
Markdown table (docs/subprocesses.md). Usage: python scripts/subprocess_overhead.py [ROUNDS]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = """
import sys, time

def work():
    start = time.perf_counter()
    n = 0
    for i in range(3_000_000):
        n += i
    return time.perf_counter() - start

if __name__ == "__main__":
    print(work())
"""

SUITE = """
import json, multiprocessing as mp, os, statistics, subprocess, sys, time
import child

def _timed(run):
    start = time.perf_counter()
    run()
    return time.perf_counter() - start

def _spawn_noop():
    p = mp.get_context("spawn").Process(target=int)
    p.start(); p.join()

def _spawned_work(queue):
    queue.put(child.work())

def test_children():
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    p = ctx.Process(target=_spawned_work, args=(queue,))
    p.start(); spawn_work = queue.get(); p.join()
    fork_queue = mp.get_context("fork").SimpleQueue()
    p = mp.get_context("fork").Process(target=_spawned_work, args=(fork_queue,))
    p.start(); fork_work = fork_queue.get(); p.join()
    out = subprocess.run([sys.executable, child.__file__], capture_output=True, text=True)
    result = {
        "start_subprocess_s": statistics.median(
            _timed(lambda: subprocess.run([sys.executable, "-c", "pass"])) for _ in range(5)),
        "start_spawn_s": _timed(_spawn_noop),
        "work_subprocess_s": float(out.stdout),
        "work_fork_s": fork_work,
        "work_spawn_s": spawn_work,
    }
    with open(os.environ["RESULTS"], "a") as f:
        f.write(json.dumps(result) + "\\n")
"""

MODES = {
    "plain pytest": [],
    "--profile": ["--profile"],
    "--profile --profile-subprocesses --profile-memory=no": [
        "--profile",
        "--profile-subprocesses",
        "--profile-memory=no",
    ],
    "--profile --profile-subprocesses": ["--profile", "--profile-subprocesses"],
}
COLUMNS = (
    "start_subprocess_s",
    "start_spawn_s",
    "work_subprocess_s",
    "work_fork_s",
    "work_spawn_s",
)


def main(rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "child.py").write_text(CHILD)
        (root / "test_overhead.py").write_text(SUITE)
        results: dict[str, list[dict]] = {mode: [] for mode in MODES}
        for _ in range(rounds):
            for mode, args in MODES.items():
                path = root / "results.jsonl"
                path.unlink(missing_ok=True)
                env = dict(os.environ, RESULTS=str(path))
                cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
                subprocess.run(cmd, cwd=root, env=env, check=True, capture_output=True)
                results[mode].append(json.loads(path.read_text()))
    print(f"medians of {rounds} interleaved rounds, seconds")
    print("| mode | " + " | ".join(COLUMNS) + " |")
    print("|---" * (len(COLUMNS) + 1) + "|")
    for mode, rows in results.items():
        cells = [f"{statistics.median(r[c] for r in rows):.3f}" for c in COLUMNS]
        print(f"| {mode} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
