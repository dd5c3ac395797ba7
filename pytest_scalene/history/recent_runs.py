"""Judging a test against its own recent runs on this machine: it regressed when a metric is
above the runs' median by more than MADS robust standard deviations (1.4826 x the median
absolute deviation) AND by more than the noise rule's absolute floor. The machine's own spread
sets the tolerance, so a quiet runner gets a tight gate and a noisy one a loose one, without
anybody choosing a percentage (docs/history.md, "Judging against history")."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..core.verdict import REGRESSION, Verdict
from ..gates.comparison import CPU_TIMED
from ..gates.machine_speed import explains_growth, plausible, slower_by
from ..gates.metrics import COMPARED
from ..gates.noise_rule import NoiseRule

MADS = 5.0  # how many robust standard deviations above the median still pass
MAD_TO_SIGMA = 1.4826  # for normal noise, sigma = 1.4826 x MAD
MIN_RUNS = 5


@dataclass(frozen=True)
class HistoryVerdict:
    metric: str
    median: float
    spread: float  # robust standard deviation (MAD_TO_SIGMA x MAD)
    limit: float
    value: float
    runs: int
    passed: bool
    message: str

    def verdict(self) -> Verdict:
        """The gates' verdict: against history, the baseline is the runs' median."""
        return Verdict(
            REGRESSION,
            self.metric,
            self.limit,
            self.value,
            self.passed,
            self.message,
            None,
            self.median,
        )


def _spread(values: Sequence[float], median: float) -> float:
    return MAD_TO_SIGMA * statistics.median(abs(v - median) for v in values)


def machine_then(past: Sequence[dict[str, Any]]) -> float | None:
    """The median of the machine's speed read beside the earlier runs (gates/machine_speed.py),
    None where none was (runs recorded before schema 4)."""
    readings = [float(p["machine_s"]) for p in past if plausible(p.get("machine_s"))]
    return statistics.median(readings) if readings else None


def judge(
    current: dict[str, float | None],
    past: Sequence[dict[str, Any]],
    rule: NoiseRule,
    machine_now: float | None = None,
) -> tuple[list[HistoryVerdict], list[str]]:
    """Verdicts for the metrics measured now and in at least MIN_RUNS earlier passed runs, and
    notes for those that could not be judged. `machine_now`: the machine's speed read beside
    the runs judged; a timed CPU growth that the machine's slowdown since the earlier runs
    explains is then not judged (a note, no verdict) instead of failing."""
    verdicts: list[HistoryVerdict] = []
    notes: list[str] = []
    then = machine_then(past)
    slower = slower_by(then, machine_now)
    for metric in COMPARED:
        value = current.get(metric.name)
        earlier = [float(p[metric.name]) for p in past if p.get(metric.name) is not None]
        if value is None:
            continue
        if len(earlier) < MIN_RUNS:
            if earlier or metric.name == "cpu_s":
                notes.append(
                    f"{metric.label} not judged against history: {len(earlier)} earlier passed "
                    f"run(s) on this machine with these options, {MIN_RUNS} needed"
                )
            continue
        median = statistics.median(earlier)
        spread = _spread(earlier, median)
        limit = median + max(MADS * spread, rule.floor(metric.name))
        passed = value <= limit
        fmt = metric.format
        change = f"{(value / median - 1) * 100:+.0f}%" if median > 0 else "from 0"
        # Against the earlier runs slowed as much as the machine is now (median and spread
        # `slower` times larger) nothing regressed: the growth may be the machine's alone.
        slowed = slower * median + max(MADS * slower * spread, rule.floor(metric.name))
        if not passed and metric.name in CPU_TIMED and slower > 1.0 and value <= slowed:
            notes.append(
                f"{metric.label} not judged against history: {fmt(value)} vs median "
                f"{fmt(median)} of the last {len(earlier)} runs ({change}), but "
                + explains_growth(
                    slower, machine_now or 0.0, then or 0.0, "than in those runs", "their median"
                )
            )
            continue
        head = metric.label if passed else f"{metric.label} regressed against history:"
        message = (
            f"{head} {fmt(value)} vs median {fmt(median)} of the last {len(earlier)} runs "
            f"on this machine ({change}); fails above {fmt(limit)} (median + max({MADS:g} x "
            f"spread {fmt(spread)}, floor {fmt(rule.floor(metric.name))}))"
        )
        verdicts.append(
            HistoryVerdict(metric.name, median, spread, limit, value, len(earlier), passed, message)
        )
    return verdicts, notes
