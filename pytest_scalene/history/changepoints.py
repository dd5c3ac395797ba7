"""Change points in a test's series of figures: where its level stepped up or down and stayed.

Candidates come from ruptures' kernel change point detection (KernelCPD: an exact penalised
segmentation, PELT in C) with a Gaussian (RBF) kernel, whose bounded cost keeps a single slow
run (a spike of 1.5x is common on a shared machine) from opening a segment of its own; the
kernel's width follows the data (the median heuristic), so the series need no scaling. Measured
against Pelt with an L1 cost, E-Divisive (signal-processing-algorithms) and Apache Otava on this
machine's recorded noise: docs/history.md, "Change points". A candidate is kept only when the
medians on its two sides differ by at least MIN_STEP: timings move by a few percent for reasons
no commit caused.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

MIN_SEGMENT = 5  # points on each side of a change point
MIN_STEP = 0.10  # relative change of the median that counts as a step
PENALTY = 3.0  # x log(n): higher finds fewer, larger steps


class ChangePointsUnavailable(RuntimeError):
    """ruptures is not installed."""


@dataclass(frozen=True)
class ChangePoint:
    index: int  # the first point after the step
    before: float  # median of the segment before it
    after: float  # median of the segment after it

    @property
    def ratio(self) -> float:
        return self.after / self.before if self.before else float("inf")


def _segments(values: Sequence[float]) -> list[int]:
    try:
        import numpy as np
        import ruptures
    except ImportError:
        raise ChangePointsUnavailable(
            "change points need ruptures: pip install 'pytest-scalene[history]'"
        ) from None
    series = np.asarray(values, dtype=float).reshape(-1, 1)
    found = ruptures.KernelCPD(kernel="rbf", min_size=MIN_SEGMENT, jump=1).fit(series)
    return [int(i) for i in found.predict(pen=PENALTY * np.log(len(series)))[:-1]]


def detect(values: Sequence[float | None]) -> list[ChangePoint]:
    """The steps in `values` (None: not measured in that run), oldest first; indices refer to
    `values`."""
    kept = [(i, float(v)) for i, v in enumerate(values) if v is not None]
    if len(kept) < 2 * MIN_SEGMENT:
        return []
    series = [v for _, v in kept]
    if max(series) == min(series):
        return []
    cuts = _segments(series)
    bounds = [0, *cuts, len(series)]
    points = []
    for k, cut in enumerate(cuts, start=1):
        before = statistics.median(series[bounds[k - 1] : cut])
        after = statistics.median(series[cut : bounds[k + 1]])
        low = min(abs(before), abs(after))
        if low == 0 and before != after or low and abs(after - before) / low >= MIN_STEP:
            points.append(ChangePoint(kept[cut][0], before, after))
    return points
