"""Unicode block sparklines of a memory footprint timeline ([[t_s, mb], ...])."""

from __future__ import annotations

from collections.abc import Sequence

BLOCKS = "▁▂▃▄▅▆▇█"

Timeline = Sequence[Sequence[float]]


def resample(
    timeline: Timeline, width: int, start: float | None = None, end: float | None = None
) -> list[float]:
    """The footprint in `width` equal time buckets from `start` to `end` (default: the
    timeline's own span). The footprint is a step function (a sample holds until the next), and
    each bucket takes its highest value, so a short spike is never averaged away."""
    points = sorted((float(t), float(mb)) for t, mb in timeline)
    if width < 1 or not points:
        return []
    t0 = points[0][0] if start is None else start
    t1 = points[-1][0] if end is None else end
    span = t1 - t0
    if span <= 0:
        return [max(mb for _, mb in points)] * width
    highest: list[float | None] = [None] * width
    last: list[float | None] = [None] * width
    for t, mb in points:
        i = min(width - 1, max(0, int((t - t0) / span * width)))
        held = highest[i]
        highest[i] = mb if held is None else max(held, mb)
        last[i] = mb
    # A bucket with no sample of its own shows the level the previous sample left; before the
    # first sample the footprint is unknown, shown as zero.
    level = 0.0
    out: list[float] = []
    for top, final in zip(highest, last, strict=True):
        out.append(level if top is None else top)
        if final is not None:
            level = final
    return out


def sparkline(values: Sequence[float], high: float | None = None, zero: str = BLOCKS[0]) -> str:
    """One block character per value, scaled from 0 to `high` (default: the largest value);
    values of zero or less are drawn as `zero` (a space shows "nothing held here" best)."""
    if not values:
        return ""
    top = max(values) if high is None else high
    last = len(BLOCKS) - 1
    return "".join(
        BLOCKS[min(last, max(0, round(v / top * last)))] if v > 0 and top > 0 else zero
        for v in values
    )


def timeline_sparkline(
    timeline: Timeline,
    width: int,
    start: float | None = None,
    end: float | None = None,
    high: float | None = None,
    zero: str = BLOCKS[0],
) -> str:
    """A `width`-character sparkline of `timeline`, or "" when it has no point."""
    return sparkline(resample(timeline, width, start, end), high, zero)
