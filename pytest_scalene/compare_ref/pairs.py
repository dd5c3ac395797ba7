"""The paired runs of one test in the workers (workers.py) of both sides: setup in every worker,
one warm-up run each, then pairs of runs, all on one CPU, each in the next worker of each side
(round robin), alternating which side goes first, until the sequential rule (verdict.py)
decides, on the test's time and on each function's (a function still unsure takes the pairs on
to the next stage). A test that fails in a worker makes a note; a worker that dies or hangs
raises WorkerError."""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import ab_statistic
from .workers import STARTUP_TIMEOUT_S, WorkerError, WorkerProcess

SETUP_TIMEOUT_S = 300.0
RUN_TIMEOUT_FLOOR_S = 60.0  # a run may take this long, or 20x its warm-up, whichever is more
TARGET_RUN_S = 0.02  # a test faster than this is called several times per measured run
MAX_INNER = 200


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
    second_ratio: float | None = None  # the fresh workers' reading that overturned the first
    workers: int = 1  # per side: run i ran in worker i % workers (the function rule's clusters)


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
    if n not in {s.pairs for s in ab_statistic.STAGES} and n < ab_statistic.FUNCTION_MAX_PAIRS:
        return None
    outcome.test_verdict = ab_statistic.decide(outcome.ratios)
    outcome.functions = ab_statistic.judge_functions(
        outcome.ratios,
        outcome.baseline_runs,
        outcome.current_runs,
        baseline_inclusive=outcome.baseline_inclusive,
        current_inclusive=outcome.current_inclusive,
        workers=outcome.workers,
    )
    states = {f.state for f in outcome.functions}
    if outcome.test_verdict == "fail" or "fail" in states:
        return "fail"
    if n >= ab_statistic.FUNCTION_MAX_PAIRS:
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
    outcome = Outcome(nodeid, workers=min(len(bases), len(currents)))
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
    # Sized by what a run costs, hooks included; judged on the test's own call (worker.py).
    fastest = max(min(r.get("run_s", r["cpu_s"]) for r in warm), 1e-6)
    outcome.inner = inner = max(1, min(MAX_INNER, math.ceil(TARGET_RUN_S / fastest)))
    timeout = max(RUN_TIMEOUT_FLOOR_S, 20 * inner * max(r.get("run_s", r["cpu_s"]) for r in warm))
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
    outcome.growth = ab_statistic.most_growth(lines[0], lines[1])
    for judged in outcome.functions:  # the failing functions' lines (they come first)
        if judged.state == "fail":
            found = ab_statistic.line_of(lines[0], lines[1], judged.file, judged.function)
            outcome.function_lines[(judged.file, judged.function)] = found
