"""The machine's speed beside a test's timed runs, for the stored CPU times (baseline_judge.py).

On a shared machine a process's CPU time moves with what its neighbours do to the caches and
the memory bus: this 2-core VM alternated between 1.4 ms and 2.7 ms for one Python loop within
seconds (2026-11-27), and a memory-bound neighbour slowed it 1.8x. A stored CPU time saved in a
fast phase and compared in a slow one that outlasts the confirmation rounds reads as a
regression of the unchanged code (one read 1.89 ms a call against ~1.0 ms).

So a fixed workload, the probe, is timed beside each timed run, on both sides alike: after each
run saved into a baseline, and after each run of a comparison's confirmation rounds. Its fastest
time stands beside the test's fastest run (the figure compared). When a CPU regression survives
the confirmation, the probe's fastest now over its fastest then says how much slower the machine
runs: a growth that this slowdown explains is not judged (the gate says so and the run fails
with exit status 7), never passed and never called a regression. The ratio is never used to
scale a figure: a probe that reads slow at save time would then fail unchanged code
(docs/baselines.md, rule 5, measured that), while as an excuse a slow saved probe only excuses
less.
"""

from __future__ import annotations

import math
import time

from ..core import extra_keys
from ..core.model import TestProfile
from ..core.natural_values import is_number

PROBE_LOOPS = 25_000  # ~1.4 ms of CPU here in a fast phase
PROBE_RUNS = 3  # the fastest of them: one run can take an interrupt
# The probe's own spread: within the VM's fast phases its readings sat 1.07x (median) and 1.16x
# (90th percentile) above the fastest of 7 minutes' (2026-11-27). A machine no slower than this
# runs as fast as at the save: a regression there is judged, and the confirmation does not wait.
SAME_SPEED = 1.15
# No machine runs the probe's loops in under 0.1 ms (4 ns a loop; 0.7-1.4 ms here): a reading
# below it is no speed but the process clock's tick, read until 2026-11-28 (probe_s), kept in a
# baseline or a history saved then. It is taken as no reading.
FLOOR_S = 1e-4


def _work() -> int:
    total = 0
    for i in range(PROBE_LOOPS):
        total += i * i % 7
    return total


def probe_s() -> float:
    """The fastest CPU seconds of PROBE_RUNS runs of the probe, on this thread's clock: while a
    CPU-time timer is armed (the sampler's), and for up to a tick after, the process's clock
    advances only at the kernel's ticks (4 ms here): ~1 ms of work read 0.0 or a tick, baselines
    were often saved with a machine speed of 0 (which excuses nothing) and the confirmation's
    readings were noise."""
    best = float("inf")
    for _ in range(PROBE_RUNS):
        start = time.clock_gettime(time.CLOCK_THREAD_CPUTIME_ID)
        _work()
        best = min(best, time.clock_gettime(time.CLOCK_THREAD_CPUTIME_ID) - start)
    return best


def fastest(held: object) -> float:
    """Time the probe now: the faster of this reading and `held` (an earlier one, if any)."""
    seconds = round(probe_s(), 7)
    return held if isinstance(held, (int, float)) and 0 < held < seconds else seconds


class RecentProbe:
    """The probe for every test of a recorded run (the history), timed at most every REPROBE_S
    of wall time: a reading each test would cost ~4 ms a test, one a second costs ~0.4%. A
    reading up to a second old can miss a phase that began since: the history compares the
    median of its runs' readings, which one such reading does not move."""

    REPROBE_S = 1.0

    def __init__(self) -> None:
        self._read_at = -math.inf
        self._seconds = 0.0

    def reading(self) -> float:
        now = time.monotonic()
        if now - self._read_at >= self.REPROBE_S:
            self._seconds = round(probe_s(), 7)
            self._read_at = now
        return self._seconds


def explains_growth(slower: float, now: float, then: float, since: str, then_is: str) -> str:
    """The end of a "not judged" message: the machine runs `slower` times slower `since` (its
    readings now and then, `then_is` how the earlier one was taken)."""
    return (
        f"the machine runs {slower:.2f}x slower {since} (a fixed loop timed beside the runs: "
        f"{now * 1e3:.2f} ms now, {then * 1e3:.2f} ms then, {then_is}) through every "
        "confirmation round, which explains the growth; run again on a quieter machine, or "
        "judge instruction counts (--profile-measure=instructions)"
    )


def note_probe(profile: TestProfile) -> None:
    """Time the probe now and keep the fastest reading in the profile (extra_keys.MACHINE_S)."""
    profile.extra[extra_keys.MACHINE_S] = fastest(profile.extra.get(extra_keys.MACHINE_S))


def plausible(reading: object) -> bool:
    """Whether `reading` is a probe's time at all (FLOOR_S)."""
    return is_number(reading) and reading >= FLOOR_S


def slower_by(saved: object, now: object) -> float:
    """How many times slower the machine runs now than when the figure was saved (1.0 when it
    runs within SAME_SPEED of it or faster, or either probe is missing)."""
    if not plausible(saved) or not plausible(now):
        return 1.0
    ratio = now / saved
    return ratio if ratio > SAME_SPEED else 1.0
