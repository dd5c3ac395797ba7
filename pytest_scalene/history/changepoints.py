"""Change points in a test's series of figures: where its level stepped up or down and stayed.

Candidates come from ruptures' PELT search (an exact, penalised segmentation; benchmarks and the
choice of library: docs/history.md, "Change points"). The series is divided by its median and
segmented with a robust (L1, median-based) cost, penalised in proportion to the noise, which is
estimated from the differences of neighbouring points so that a step does not inflate it. A
candidate is kept only when the medians on its two sides differ by at least MIN_STEP: on a shared
machine timings move by a few percent for reasons no commit caused.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

MIN_SEGMENT = 5  # points on each side of a change point
MIN_STEP = 0.10  # relative change of the median that counts as a step
PENALTY = 3.0  # x the noise x log(n): higher finds fewer, larger steps


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
    series = np.asarray(values, dtype=float)
    level = float(np.median(series)) or 1.0
    series = series / level
    noise = 1.4826 * float(np.median(np.abs(np.diff(series)))) / np.sqrt(2)
    penalty = PENALTY * max(noise, 1e-3) * np.log(len(series))
    found = ruptures.Pelt(model="l1", min_size=MIN_SEGMENT, jump=1).fit(series)
    return [int(i) for i in found.predict(pen=penalty)[:-1]]


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
