"""The noise rule (docs/baselines.md): how much a figure must grow to be a regression. It must
grow by more than the relative tolerance AND by more than an absolute floor below which the
profiler cannot tell a difference from noise (CPU: max(0.05 s, 5 sampling intervals); memory:
one sampling threshold; a figure counted in sampling steps, such as copy volume and sampled
allocation: one step, from the METRICS table). A CPU figure must also grow by more than
CPU_ERRORS standard errors of its samples: n samples of interval dt read sqrt(n) * dt apart, so
a figure of a few samples is judged with that error; so must a line's share of a figure counted
in steps, whose steps land on whichever line runs when each is sampled."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..core.model import PER_CALL_EXTRA, counted_calls
from .metrics import METRICS

MIN_CPU_FLOOR_S = 0.05
CPU_FLOOR_INTERVALS = 5
# Standard errors of the samples a CPU growth must exceed. With 3, a test of 0.03 s (3 samples)
# must grow by 0.13 s to fail; above ~0.45 s of CPU the +75% tolerance is the larger limit.
CPU_ERRORS = 3.0
# A CPU-time timer fires on the scheduler tick: 250 signals per CPU-second were measured here
# whatever smaller interval was asked (../shared/docs/verdict-noise.md), so a sample weighs at
# least 4 ms.
MIN_SAMPLE_S = 0.004
GPU_FLOOR_MB = 32.0  # NVML reports allocator reservations, which move in chunks of MBs
# Counted, yet not the same in every session: on simplejson's own suite a 0.5 M-instruction
# test read 504,492 in one session, 502,848 in the next five and 502,956 once its __pycache__
# folders were removed (the interpreter's state), and one function in it +4% (+2,000).
# Growth under this many instructions (~10 us) is not judged, for a test or a function.
INSTRUCTIONS_FLOOR = 20_000
LINE_SHARE = 0.10


@dataclass(frozen=True)
class NoiseRule:
    tolerance: float | None = None  # allowed relative growth; None: per-metric defaults
    cpu_floor_s: float = MIN_CPU_FLOOR_S
    # One memory sampling threshold: the floor of memory figures and the unit of the steps of
    # those counted in steps (Metric.step_thresholds: a copy step is two thresholds).
    memory_floor_mb: float = 10.0
    gpu_floor_mb: float = GPU_FLOOR_MB
    line_share: float = LINE_SHARE
    interval_s: float = 0.01  # the CPU time one sample weighs: the size of its error
    # A benchmark test's figures are per call (benchmark/calls.py): its CPU floor and sampling
    # error are the test's over `calls` (both sides' harmonic mean), and a figure counted in
    # steps may read one step off on each side: a step over each side's calls (step_scale).
    calls: float = 1.0
    step_scale: float = 1.0
    # A benchmark test's instructions are per call over this many counted calls: the floor,
    # a count's noise whatever its size, is divided by them (instructions/benchmark_count.py).
    counted_calls: int = 1

    @classmethod
    def for_run(
        cls, tolerance: float | None, interval_s: float, memory_threshold: int
    ) -> NoiseRule:
        return cls(
            tolerance=tolerance,
            cpu_floor_s=max(MIN_CPU_FLOOR_S, CPU_FLOOR_INTERVALS * interval_s),
            memory_floor_mb=memory_threshold / 2**20,
            interval_s=max(MIN_SAMPLE_S, interval_s),
        )

    def per_call(self, now: float, then: float) -> NoiseRule:
        if now < 1 or then < 1:  # a whole test (incomparable.py: never one side per call)
            return self
        return replace(self, calls=2 / (1 / now + 1 / then), step_scale=1 / now + 1 / then)

    def counted(self, before: dict[str, str], after: dict[str, str]) -> NoiseRule:
        """For instruction counts of as many counted calls on both sides (their environments;
        counts of different calls are not compared: incomparable.py)."""
        calls = counted_calls(before)
        if calls is None or calls != counted_calls(after):
            return self
        return replace(self, counted_calls=calls)

    def tolerance_for(self, metric: str) -> float:
        if self.tolerance is not None:
            return self.tolerance
        return METRICS[metric].tolerance

    def floor(self, metric: str) -> float:
        """The smallest growth of `metric` that can count as a regression, whatever its value."""
        if metric == "cpu_s":
            return self.cpu_floor_s / self.calls
        if metric == "gpu_peak_mb":
            return self.gpu_floor_mb
        if metric == "instructions":
            return INSTRUCTIONS_FLOOR / self.counted_calls
        step = METRICS[metric].step_thresholds * self.memory_floor_mb
        if metric in PER_CALL_EXTRA:
            return max(self.memory_floor_mb, step) * self.step_scale
        return max(self.memory_floor_mb, step)

    def sampling_growth(self, metric: str, before: float) -> float:
        """The growth d of a CPU figure that equals CPU_ERRORS standard errors of the difference
        of two sampled figures, before and before + d: d = z * sqrt(dt * (2 * before + d))."""
        if metric != "cpu_s" or self.interval_s <= 0:
            return 0.0
        z2dt = CPU_ERRORS**2 * self.interval_s / self.calls
        return (z2dt + math.sqrt(z2dt**2 + 8 * z2dt * max(0.0, before))) / 2

    def least_growth(self, metric: str, before: float) -> float:
        """The growth from `before` that a regression must exceed: the tolerance, the floor and
        the sampling error, whichever is largest."""
        return max(
            self.tolerance_for(metric) * before,
            self.floor(metric),
            self.sampling_growth(metric, before),
        )

    def regressed(self, metric: str, before: float, after: float) -> bool:
        return after - before > self.least_growth(metric, before)

    def line_regressed(
        self, metric: str, before: float, after: float, totals: tuple[float, float]
    ) -> bool:
        """A line's figure counted in steps is its share of the test's steps (`totals`: the
        test's, before and after), drawn by where each step's sample lands: of k steps, a line
        of share p holds k p (1 - p) steps squared of variance (p pooled over both sides: a
        share read as 0 or 1 on one side is no proof of none), and its growth must also exceed
        CPU_ERRORS standard errors of the two draws. An unchanged cattrs benchmark's copies
        moved 2 of 4 steps between two lines; a line with all of its test's steps draws none."""
        step = METRICS[metric].step_thresholds * self.memory_floor_mb / self.calls
        if not self.regressed(metric, before, after) or step <= 0 or sum(totals) <= 0:
            return self.regressed(metric, before, after)
        share = min(1.0, (before + after) / sum(totals))
        variance = sum(totals) / step * share * (1 - share)  # in steps squared
        return after - before > CPU_ERRORS * math.sqrt(variance) * step
