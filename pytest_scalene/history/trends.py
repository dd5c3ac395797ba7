"""`pytest-scalene history URL`: per-test (and with --lines, per-line) trends over the last N
runs in the terminal, as sparklines with the latest value, the median and the change points,
each naming the first commit after its step; --html also writes the page of charts."""

from __future__ import annotations

import argparse
import shutil
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from ..config.options import positive_int
from ..reports.sparkline import sparkline
from .changepoints import ChangePoint, ChangePointsUnavailable, detect
from .run_records import LINE_METRICS, TEST_METRICS
from .store import HistoryStore, Point, RunInfo

DEFAULT_LAST = 50
LINES_PER_TEST = 5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("url", help="the history store: a path, sqlite:///PATH or postgresql://...")
    parser.add_argument(
        "--last",
        type=positive_int,
        default=DEFAULT_LAST,
        help=f"the last N runs (default {DEFAULT_LAST})",
    )
    parser.add_argument(
        "--metric", default="cpu_s", choices=TEST_METRICS, help="the figure to show (default cpu_s)"
    )
    parser.add_argument("--test", default="", help="only tests whose node id contains TEXT")
    parser.add_argument("--machine", help="only runs on this machine fingerprint")
    parser.add_argument(
        "--lines", action="store_true", help="also show each test's costliest lines"
    )
    parser.add_argument("--html", help="also write the HTML page of charts to this path")


@dataclass(frozen=True)
class Trend:
    nodeid: str
    points: list[Point]
    values: list[float | None]
    changes: list[ChangePoint]

    def commit_at(self, index: int) -> str:
        run = self.points[index].run
        return short(run)


def short(run: RunInfo) -> str:
    commit = (run.commit or "no-commit")[:10]
    return commit + ("+dirty" if run.dirty else "")


def trends(
    store: HistoryStore, runs: list[RunInfo], metric: str, test_filter: str = ""
) -> tuple[list[Trend], str | None]:
    """Each test's series of `metric` over `runs` with its change points; and a note when
    change points could not be computed."""
    out, note = [], None
    for nodeid, points in sorted(store.series(runs).items()):
        if test_filter and test_filter not in nodeid:
            continue
        values = [p.metrics.get(metric) if p.outcome == "passed" else None for p in points]
        changes: list[ChangePoint] = []
        if note is None:
            try:
                changes = detect(values)
            except ChangePointsUnavailable as exc:
                note = str(exc)
        out.append(Trend(nodeid, points, values, changes))
    return out, note


def trend_sparkline(values: Sequence[float | None], width: int) -> str:
    """Min-to-max scaled blocks of the last `width` values; a gap (a run without the figure) is
    a space."""
    shown = list(values)[-width:]
    present = [v for v in shown if v is not None]
    if not present:
        return " " * len(shown)
    low, high = min(present), max(present)
    span = high - low or 1.0
    return "".join(
        " " if v is None else sparkline([0.125 + 0.875 * (v - low) / span], high=1.0) for v in shown
    )


def fmt_value(value: float | None) -> str:
    """A figure in four significant digits, "-" where there is none."""
    return "-" if value is None else f"{value:.4g}"


def describe_change(trend: Trend, change: ChangePoint) -> str:
    arrow = "▲" if change.after > change.before else "▼"
    return (
        f"{arrow} {(change.ratio - 1) * 100:+.0f}% from {trend.commit_at(change.index)} "
        f"(run {trend.points[change.index].run.id}: {fmt_value(change.before)} -> "
        f"{fmt_value(change.after)})"
    )


def render(
    store: HistoryStore, runs: list[RunInfo], metric: str, test_filter: str, lines: bool
) -> str:
    width = max(10, min(len(runs), shutil.get_terminal_size((120, 20)).columns - 60))
    found, note = trends(store, runs, metric, test_filter)
    first, last = runs[0], runs[-1]
    out = [
        f"{len(runs)} runs (run {first.id} {short(first)} .. run {last.id} {short(last)}), "
        f"{len(found)} tests, {metric}; change points name the first commit after the step"
    ]
    for trend in found:
        present = [v for v in trend.values if v is not None]
        median = statistics.median(present) if present else None
        out.append(
            f"{trend_sparkline(trend.values, width)}  last {fmt_value(trend.values[-1])} "
            f"median {fmt_value(median)}  {trend.nodeid}"
        )
        out += [f"    {describe_change(trend, c)}" for c in trend.changes]
        if lines:
            out += _line_trends(store, trend.nodeid, runs, width)
    if note:
        out.append(f"note: {note}")
    return "\n".join(out)


def _line_trends(store: HistoryStore, nodeid: str, runs: list[RunInfo], width: int) -> list[str]:
    series = store.line_series(nodeid, runs)
    order = {r.id: i for i, r in enumerate(runs)}
    rows = []
    for (file, line, function), points in series.items():
        values: list[float | None] = [None] * len(runs)
        for run_id, figures in points:
            values[order[run_id]] = figures.get(LINE_METRICS[0])
        latest = next((v for v in reversed(values) if v is not None), 0.0) or 0.0
        rows.append((latest, f"{file}:{line} {function}", values))
    rows.sort(key=lambda r: -r[0])
    return [
        f"    {trend_sparkline(values, width)}  {fmt_value(latest)} s  {where}"
        for latest, where, values in rows[:LINES_PER_TEST]
    ]
