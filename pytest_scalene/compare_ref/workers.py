"""The worker processes of an A/B comparison: one pytest session (worker.py) per process, in
one tree (a side), started with an environment both sides share, spoken to over two pipes with
a timeout on every reply. A worker that dies, hangs or answers nonsense raises WorkerError,
saying why and how its output ends."""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from . import worker

STARTUP_TIMEOUT_S = 300.0  # collection can import a lot
HASH_SEED = "0"
# glibc's malloc moves its mmap threshold up each time a large block is freed, so where a
# large buffer comes from (a fresh mapping, page faults included, or the heap) depends on the
# process's history: an unchanged numpy test read 1.06x in 8 of 8 comparisons after three
# other tests had run. A fixed threshold (glibc's starting value) turns that off, so a large
# buffer is a fresh mapping in every run of both sides. A user's own setting is kept.
# With the threshold fixed, glibc still gives the heap's top back to the system when more
# than 128 KB is free there (the trim threshold), and whether a test's working memory sits at
# the top depends on the process's layout: on sqlparse's own suite, an unchanged test read
# 1.6x in one direction and 0.58x in the other, depending on PYTHONPATH alone, and 1.03x in
# both with trimming off (the slow side, presumably, gave a buffer back and faulted it in
# again on every call). Nothing is trimmed in the workers: both sides keep what they free.
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_TRIM_THRESHOLD_": "4294967296"}
_TUNABLE_OF = {
    "MALLOC_MMAP_THRESHOLD_": "mmap_threshold",
    "MALLOC_TRIM_THRESHOLD_": "trim_threshold",
}
# Worker processes per side; a test's pairs rotate over them. A process can run the same code
# faster or slower than another for its whole life (its memory layout): unchanged code read
# 0.64x in one process pair of 300, and a 1.2x slowdown read 0.99x in another. Over several
# processes per side, one such process moves only its share of the pairs, not the median.
WORKERS_PER_SIDE = 3


def worker_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment both workers share: the caller's, without the allocator shim, with the
    same hash seed and a fixed malloc policy (unless the user set one)."""
    env = {k: v for k, v in environ.items() if k != "LD_PRELOAD"}  # no allocator shim
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONHASHSEED"] = HASH_SEED  # the same string hashes on both sides
    for name, value in MALLOC_ENV.items():
        if _TUNABLE_OF[name] not in env.get("GLIBC_TUNABLES", ""):
            env.setdefault(name, value)
    return env


class WorkerError(Exception):
    """A worker died, hung, or answered nonsense."""


@dataclass
class Side:
    name: str  # "baseline" or "current"
    tree: Path  # where its code is
    rootdir: Path
    tests: dict[str, str] = field(default_factory=dict)  # nodeid -> setup key
    modules: dict[str, str] = field(default_factory=dict)  # top-level module -> its file
    collection_errors: int = 0


class WorkerProcess:
    """One worker session; `request` sends a command and waits for its reply."""

    serving = "its start-up"  # what it was asked last, and for which test: for the messages
    test = ""
    quitting = False  # the quit command was sent

    def __init__(
        self, side: Side, files: Sequence[str], wanted: Sequence[str], args: Sequence[str]
    ) -> None:
        self.side = side
        self.tmp = tempfile.TemporaryDirectory(prefix=f"pytest-scalene-ab-{side.name}-")
        wanted_path = Path(self.tmp.name) / "wanted.json"
        wanted_path.write_text(json.dumps(sorted(wanted)), encoding="utf-8")
        self.log_path = Path(self.tmp.name) / "output.txt"
        self.log: TextIO = open(self.log_path, "w", encoding="utf-8")  # noqa: SIM115
        to_child, self.to_worker = os.pipe()
        self.from_worker, from_child = os.pipe()
        env = worker_env(os.environ)
        env.update(
            {
                worker.FDS_ENV: f"{to_child},{from_child}",
                worker.WANTED_ENV: str(wanted_path),
                worker.TREE_ENV: str(side.tree),
            }
        )
        folder = Path(worker.__file__).resolve().parent
        stand_in = folder.parent / "benchmark" / "benchmark_fixture.py"
        launcher = (
            "import importlib.util, sys\n"
            "def load(name, path):\n"
            "    spec = importlib.util.spec_from_file_location(name, path)\n"
            "    module = importlib.util.module_from_spec(spec)\n"
            "    sys.modules[spec.name] = module\n"
            "    spec.loader.exec_module(module)\n"
            "    return module\n"
            f"load('pytest_scalene_ab_worker_sampler', {str(folder / 'worker_sampler.py')!r})\n"
            f"load('pytest_scalene_benchmark_fixture', {str(stand_in)!r})\n"
            f"module = load('pytest_scalene_ab_worker', {str(folder / 'worker.py')!r})\n"
            "import pytest\n"
            "sys.exit(pytest.main(sys.argv[1:], plugins=[module]))\n"
        )
        command = [
            sys.executable,
            "-c",
            launcher,
            "-p",
            "no:scalene",
            "-p",
            "no:cacheprovider",
            "-q",
            "--no-header",
            f"--rootdir={side.rootdir}",
            f"--basetemp={Path(self.tmp.name) / 'basetemp'}",
            *args,
            *files,
        ]
        self.buffer = b""
        self.process = subprocess.Popen(
            command,
            cwd=side.rootdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            pass_fds=(to_child, from_child),
        )
        os.close(to_child)
        os.close(from_child)

    def output_tail(self, chars: int = 1500) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")[-chars:].strip()
        except OSError:
            return ""

    def receive(self, timeout_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WorkerError(
                    f"the {self.side.name} worker did not answer in {timeout_s:.0f} s"
                )
            ready, _, _ = select.select([self.from_worker], [], [], min(left, 1.0))
            if not ready:
                if self.process.poll() is not None:
                    break
                continue
            chunk = os.read(self.from_worker, 65536)
            if not chunk:
                break
            self.buffer += chunk
        if b"\n" not in self.buffer:
            raise WorkerError(self._ended())
        line, self.buffer = self.buffer.split(b"\n", 1)
        reply = json.loads(line)
        if "failed" in reply:  # the command raised in the worker (worker.py)
            raise WorkerError(
                f"the {self.side.name} worker failed during {self.serving}: {reply['failed']}"
            )
        return reply

    def _ended(self) -> str:
        """Why the worker is gone: its exit status and the last lines of its output."""
        try:
            status: int | None = self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            status = None
        tail = " | ".join(line.strip() for line in self.output_tail().splitlines()[-4:])
        return (
            f"the {self.side.name} worker ended (exit status {status}) during {self.serving}; "
            f"its output ends with: {tail or '(nothing)'}"
        )

    def request(self, message: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        data = (json.dumps(message) + "\n").encode()
        if message.get("cmd") == "setup":
            self.test = message.get("nodeid", "")
        self.serving = f"'{message.get('cmd')}' of {self.test}"
        try:
            os.write(self.to_worker, data)
        except OSError:
            raise WorkerError(self._ended()) from None
        return self.receive(timeout_s)

    def quit(self) -> None:
        """Ask the worker to end its session (close() waits for it)."""
        if self.quitting:
            return
        self.quitting = True
        with contextlib.suppress(OSError, AttributeError):  # ends on every CPU, not the pairs'
            os.sched_setaffinity(self.process.pid, os.sched_getaffinity(0))
        with contextlib.suppress(OSError):
            os.write(self.to_worker, b'{"cmd": "quit"}\n')

    def close(self) -> None:
        self.quit()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for fd in (self.to_worker, self.from_worker):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.log.close()
        self.tmp.cleanup()


def close_all(workers: Sequence[WorkerProcess]) -> None:
    """End the workers' sessions at once (each takes ~0.2 s to tear down and exit), then
    wait for them."""
    for process in workers:
        process.quit()
    for process in workers:
        process.close()
