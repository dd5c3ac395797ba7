"""Footprint timelines reduced for reports: Ramer-Douglas-Peucker down to at most N points.

One RDP pass records, for every point, the largest tolerance at which RDP would still keep it
(its distance from the chord when it was split off, capped by its ancestors' values). Keeping
the points above the (N+1)-th highest value is then exactly RDP at the tolerance that leaves at
most N points, without searching for that tolerance.
"""

from __future__ import annotations

from collections.abc import Sequence

MAX_POINTS = 100


def _importance(points: Sequence[tuple[float, float]]) -> list[float]:
    n = len(points)
    keep = [0.0] * n
    keep[0] = keep[-1] = float("inf")
    stack = [(0, n - 1, float("inf"))]
    while stack:
        start, end, cap = stack.pop()
        if end - start < 2:
            continue
        t0, y0 = points[start]
        t1, y1 = points[end]
        span = t1 - t0
        slope = (y1 - y0) / span if span > 0 else 0.0
        best, best_index = -1.0, start + 1
        for i in range(start + 1, end):
            t, y = points[i]
            distance = abs(y - (y0 + slope * (t - t0)))  # vertical: both axes keep their units
            if distance > best:
                best, best_index = distance, i
        value = min(best, cap)
        keep[best_index] = value
        stack.append((start, best_index, value))
        stack.append((best_index, end, value))
    return keep


def reduce(
    points: Sequence[tuple[float, float]], max_points: int = MAX_POINTS
) -> tuple[tuple[float, float], ...]:
    """`points` (time-ordered (t, value) pairs) reduced to at most `max_points`, first and last
    kept. Tuples of floats (JSON writes them as arrays): the cyclic collector stops tracking
    them at its first look, where lists, kept by every test's profile, made each of its full
    collections longer for the rest of the session."""
    if max_points < 2:
        raise ValueError(f"max_points must be >= 2, got {max_points}")
    if len(points) <= max_points:
        return tuple(map(tuple, points))  # type: ignore[arg-type]
    importance = _importance(points)
    ranked = sorted(range(len(points)), key=lambda i: importance[i], reverse=True)
    # A point split off further than its parent shares the parent's value: drop such a tie
    # group whole rather than cut it, so that the result is exactly RDP at that tolerance.
    cutoff = importance[ranked[max_points]]
    kept = sorted(i for i in ranked[:max_points] if importance[i] > cutoff)
    return tuple((points[i][0], points[i][1]) for i in kept)
