"""Long-lived worker sessions (worker.py), WORKERS_PER_SIDE in each tree, and the paired runs: for
each test, setup in every worker, one warm-up run each, then pairs of runs, all on one CPU, each
in the next worker of each side (round robin), alternating which side goes first, until the
sequential rule (verdict.py) decides, on the test's time and on each function's (a function
still unsure takes the pairs on to the next stage). A worker that dies, hangs or fails a test
makes a note, never a hang: every reply has a timeout."""

from __future__ import annotations

import contextlib
import json
import math
import os
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from . import verdict, worker

STARTUP_TIMEOUT_S = 300.0  # collection can import a lot
SETUP_TIMEOUT_S = 300.0
RUN_TIMEOUT_FLOOR_S = 60.0  # a run may take this long, or 20x its warm-up, whichever is more
TARGET_RUN_S = 0.02  # a test faster than this is called several times per measured run
MAX_INNER = 200
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
        launcher = (
            "import importlib.util, sys\n"
            "def load(name, path):\n"
            "    spec = importlib.util.spec_from_file_location(name, path)\n"
            "    module = importlib.util.module_from_spec(spec)\n"
            "    sys.modules[spec.name] = module\n"
            "    spec.loader.exec_module(module)\n"
            "    return module\n"
            f"load('pytest_scalene_ab_worker_sampler', {str(folder / 'worker_sampler.py')!r})\n"
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


@dataclass
class Outcome:
    """One test's comparison: a verdict, or a note saying why it was not judged."""

    nodeid: str
    verdict: str | None = None  # "pass" | "fail" | None (not judged)
    note: str = ""
    ratios: list[float] = field(default_factory=list)
    baseline_cpu_s: list[float] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)
    inner: int = 1
    growth: list[verdict.LineGrowth] = field(default_factory=list)
    baseline_runs: list[dict[tuple[str, str], tuple[float, int]]] = field(default_factory=list)
    current_runs: list[dict[tuple[str, str], tuple[float, int]]] = field(default_factory=list)
    # The same runs' inclusive time per function (a caller holds its callees' time).
    baseline_inclusive: list[dict[tuple[str, str], tuple[float, int]]] = field(default_factory=list)
    current_inclusive: list[dict[tuple[str, str], tuple[float, int]]] = field(default_factory=list)
    functions: list[verdict.FunctionVerdict] = field(default_factory=list)
    test_verdict: str | None = None  # the test-time rule's verdict alone
    function_lines: dict[tuple[str, str], verdict.LineGrowth | None] = field(default_factory=dict)
    first_ratio: float | None = None  # a slower first reading, confirmed (or not) by this one


def _runs_ok(replies: Sequence[dict[str, Any]], sides: Sequence[str]) -> str:
    for reply, name in zip(replies, sides, strict=True):
        if reply.get("outcome") != "passed":
            return f"it {reply.get('outcome')} on the {name} side ({reply.get('error', '')})"
        if reply.get("sampler_error"):  # the function rule would judge incomplete samples
            return f"the {name} side's line sampler failed: {reply['sampler_error']}"
    return ""


def _functions(
    reply: dict[str, Any], which: str = "functions"
) -> dict[tuple[str, str], tuple[float, int]]:
    """A run's self ("functions") or "inclusive" figures per function."""
    return {(str(f), str(q)): (float(w), int(n)) for f, q, w, n in reply.get(which, ())}


def decide(outcome: Outcome) -> str | None:
    """The verdict once both rules have one: the test's time fails, or a function fails; None
    while the test's rule wants more pairs, or a function is unsure before the last stage."""
    n = len(outcome.ratios)
    if n not in {s.pairs for s in verdict.STAGES} and n < verdict.FUNCTION_MAX_PAIRS:
        return None
    outcome.test_verdict = verdict.decide(outcome.ratios)
    outcome.functions = verdict.judge_functions(
        outcome.ratios,
        outcome.baseline_runs,
        outcome.current_runs,
        baseline_inclusive=outcome.baseline_inclusive,
        current_inclusive=outcome.current_inclusive,
    )
    states = {f.state for f in outcome.functions}
    if outcome.test_verdict == "fail" or "fail" in states:
        return "fail"
    if n >= verdict.FUNCTION_MAX_PAIRS:
        return outcome.test_verdict or "pass"
    if outcome.test_verdict is None or "unsure" in states:
        return None
    return "pass"


def _pin(workers: Sequence[WorkerProcess], cpu: int) -> None:
    for w in workers:
        with contextlib.suppress(OSError):  # the worker is gone: its next reply says so
            os.sched_setaffinity(w.process.pid, {cpu})


def pair_cpu() -> int | None:
    """The one CPU every measured run uses, or None where this process may use only one (or
    cannot set affinities): the last it may use (CPU 0 often takes more of the kernel's work)."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    return cpus[-1] if len(cpus) > 1 else None


@contextlib.contextmanager
def _coordinator_elsewhere(cpu: int | None) -> Iterator[None]:
    """This process off the runs' CPU while they are measured: its wake-ups between runs
    (a reply, the rule's arithmetic) must not preempt a run."""
    if cpu is None:
        yield
        return
    before = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, before - {cpu})
    except OSError:
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, before)


def compare_test(
    nodeid: str,
    following: str | None,
    bases: Sequence[WorkerProcess],
    currents: Sequence[WorkerProcess],
) -> Outcome:
    """Pairs of runs of `nodeid` until the rule decides, pair n in the n-th worker of each side
    (round robin). WorkerError propagates."""
    outcome = Outcome(nodeid)
    everyone = [*bases, *currents]
    # Every run on one CPU, the same for both sides, warm-ups included, and that CPU kept busy
    # from pair to pair: when pairs moved to a CPU that had been idle, the run that came first
    # there (always the baseline's) read slower by 15% or more in 13% of pairs, against 4% for
    # the other side, and unchanged code read 0.88-0.95x in 5 of 228 comparisons.
    cpu = pair_cpu()
    if cpu is not None:
        _pin(everyone, cpu)
    setups = [w.request({"cmd": "setup", "nodeid": nodeid}, SETUP_TIMEOUT_S) for w in everyone]
    try:
        _run_pairs(outcome, setups, bases, currents, cpu)
    except WorkerError:
        for w in everyone:  # what failed is the news, not the teardowns that fail after it
            with contextlib.suppress(WorkerError):
                w.request({"cmd": "teardown", "next": following}, SETUP_TIMEOUT_S)
        raise
    for w in everyone:
        w.request({"cmd": "teardown", "next": following}, SETUP_TIMEOUT_S)
    return outcome


def _run_pairs(
    outcome: Outcome,
    setups: Sequence[dict[str, Any]],
    bases: Sequence[WorkerProcess],
    currents: Sequence[WorkerProcess],
    cpu: int | None,
) -> None:
    """The set-up test's warm-ups, then its pairs into `outcome`, or a note on it."""
    everyone = [*bases, *currents]
    names = [w.side.name for w in everyone]
    problem = _runs_ok(setups, [f"{n} side's setup; the" for n in names])
    if problem:
        outcome.note = f"not judged: its setup did not pass ({problem})"
        return
    # Each process warms up on its own: first calls (imports, caches) are not measured. The
    # heap is frozen between runs (worker.py); a test that fails so runs unfrozen.
    freeze = True
    warm = [w.request({"cmd": "run", "inner": 1}, STARTUP_TIMEOUT_S) for w in everyone]
    if _runs_ok(warm, names):
        freeze = False
        warm = [
            w.request({"cmd": "run", "inner": 1, "freeze": False}, STARTUP_TIMEOUT_S)
            for w in everyone
        ]
    if problem := _runs_ok(warm, names):
        outcome.note = f"not judged: {problem}"
        return
    fastest = max(min(r["cpu_s"] for r in warm), 1e-6)
    outcome.inner = inner = max(1, min(MAX_INNER, math.ceil(TARGET_RUN_S / fastest)))
    timeout = max(RUN_TIMEOUT_FLOOR_S, 20 * inner * max(r["cpu_s"] for r in warm))
    for w in everyone:  # the warm-up's samples are not pooled
        w.request({"cmd": "lines"}, SETUP_TIMEOUT_S)
    decided = None
    with _coordinator_elsewhere(cpu):
        while decided is None:
            n = len(outcome.ratios)
            base, cur = bases[n % len(bases)], currents[n % len(currents)]
            order = (base, cur) if n % 2 == 0 else (cur, base)
            run = {"cmd": "run", "inner": inner, "freeze": freeze}
            replies = {id(w): w.request(run, timeout) for w in order}
            base_run, cur_run = replies[id(base)], replies[id(cur)]
            if problem := _runs_ok((base_run, cur_run), ("baseline", "current")):
                outcome.note = f"not judged: {problem}"
                return
            outcome.baseline_cpu_s.append(base_run["cpu_s"] / inner)
            outcome.cpu_s.append(cur_run["cpu_s"] / inner)
            outcome.ratios.append(cur_run["cpu_s"] / max(base_run["cpu_s"], 1e-9))
            outcome.baseline_runs.append(_functions(base_run))
            outcome.current_runs.append(_functions(cur_run))
            outcome.baseline_inclusive.append(_functions(base_run, "inclusive"))
            outcome.current_inclusive.append(_functions(cur_run, "inclusive"))
            decided = decide(outcome)
    outcome.verdict = decided
    lines = [
        [line for w in side for line in w.request({"cmd": "lines"}, SETUP_TIMEOUT_S)["lines"]]
        for side in (bases, currents)
    ]
    outcome.growth = verdict.most_growth(lines[0], lines[1])
    for judged in outcome.functions:  # the failing functions' lines (they come first)
        if judged.state == "fail":
            found = verdict.line_of(lines[0], lines[1], judged.file, judged.function)
            outcome.function_lines[(judged.file, judged.function)] = found
