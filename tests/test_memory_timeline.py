"""Timeline reduction: Ramer-Douglas-Peucker to at most 100 points."""

from __future__ import annotations

import math
import random

import pytest

from pytest_scalene.sampling import timeline


def _naive_rdp(points: list[tuple[float, float]], epsilon: float) -> list[int]:
    """Textbook recursive RDP with vertical distance: the indices it keeps."""

    def keep(start: int, end: int) -> list[int]:
        (t0, y0), (t1, y1) = points[start], points[end]
        slope = (y1 - y0) / (t1 - t0) if t1 > t0 else 0.0
        best, index = -1.0, -1
        for i in range(start + 1, end):
            d = abs(points[i][1] - (y0 + slope * (points[i][0] - t0)))
            if d > best:
                best, index = d, i
        if index < 0 or best <= epsilon:
            return [start]
        return keep(start, index) + keep(index, end)

    return keep(0, len(points) - 1) + [len(points) - 1]


def test_short_timelines_are_kept_whole() -> None:
    points = [(0.0, 0.0), (0.5, 3.0), (1.0, 1.0)]
    assert timeline.reduce(points) == ((0.0, 0.0), (0.5, 3.0), (1.0, 1.0))


def test_long_timelines_keep_endpoints_and_spikes() -> None:
    points = [(i / 1000, math.sin(i / 50)) for i in range(5000)]
    points[2345] = (2.345, 40.0)  # a spike must survive
    reduced = timeline.reduce(points)
    assert 90 <= len(reduced) <= 100
    assert reduced[0] == (0.0, points[0][1]) and reduced[-1] == points[-1]
    assert (2.345, 40.0) in reduced
    assert [p[0] for p in reduced] == sorted(p[0] for p in reduced)


@pytest.mark.parametrize("seed", range(5))
def test_matches_textbook_rdp(seed: int) -> None:
    rng = random.Random(seed)
    y = 0.0
    points = []
    for i in range(600):
        y += rng.gauss(0, 1)
        points.append((i * 0.01, y))
    reduced = timeline.reduce(points, max_points=40)
    assert 30 <= len(reduced) <= 40
    # It is the textbook algorithm at the tolerance of the first point left out.
    kept = [points.index((t, v)) for t, v in reduced]
    importance = timeline._importance(points)
    epsilon = max(v for i, v in enumerate(importance) if i not in kept)
    assert _naive_rdp(points, epsilon) == kept


def test_straight_lines_collapse() -> None:
    points = [(float(i), 2.0 * i) for i in range(1000)]
    assert timeline.reduce(points, max_points=10) == ((0.0, 0.0), (999.0, 1998.0))


def test_bad_limit() -> None:
    with pytest.raises(ValueError, match="max_points"):
        timeline.reduce([(0.0, 0.0)], max_points=1)
