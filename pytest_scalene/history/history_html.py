"""The history page: one self-contained HTML file with a chart per test over the last N runs.

Charts are inline SVG drawn here, so the page needs no script at all: its Content-Security-Policy
forbids every script and every fetch. Each point's tooltip (an SVG <title>) names its run, commit,
branch and value; each change point is a marked vertical line naming the first commit after the
step. Tests with change points come first.
"""

from __future__ import annotations

import html
import os
import statistics
import time

from ..core.atomic_write import write_text_atomic
from .store import HistoryStore, RunInfo
from .trends import Trend, describe_change, fmt_value, short, trends

CSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
WIDTH, HEIGHT, PAD = 640, 120, 6
POINT_LIMIT = 300  # above this many runs, points have no marker of their own (page size)

STYLE = """
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.3em} h2{font-size:1em;font-family:monospace;margin:1.4em 0 .2em}
svg{background:#fafafa;border:1px solid #ddd} .line{fill:none;stroke:#2563eb;stroke-width:1.5}
.pt{fill:#2563eb} .gap{fill:#bbb} .cp{stroke:#dc2626;stroke-dasharray:4 3}
.cptext{fill:#dc2626;font-size:11px} .meta{color:#555;font-size:12px} ul{margin:.2em 0}
"""


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _when(run: RunInfo) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(run.started_at))


def chart(trend: Trend) -> str:
    n = len(trend.values)
    present = [v for v in trend.values if v is not None]
    if not present:
        return "<p class=meta>no value in these runs</p>"
    low, high = min(0.0, min(present)), max(present) or 1.0

    def x(i: int) -> float:
        return PAD + (WIDTH - 2 * PAD) * (i / max(n - 1, 1))

    def y(v: float) -> float:
        return HEIGHT - PAD - (HEIGHT - 2 * PAD) * (v - low) / ((high - low) or 1.0)

    coords = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(trend.values) if v is not None)
    parts = [f'<svg width="{WIDTH}" height="{HEIGHT}" role="img">']
    parts.append(f'<polyline class="line" points="{coords}"/>')
    if n <= POINT_LIMIT:
        for i, (v, p) in enumerate(zip(trend.values, trend.points, strict=True)):
            tip = f"run {p.run.id} · {short(p.run)} · {p.run.branch or '-'} · {_when(p.run)} · " + (
                f"{v:.6g}" if v is not None else p.outcome
            )
            cls, cy = ("pt", y(v)) if v is not None else ("gap", HEIGHT - PAD)
            parts.append(
                f'<circle class="{cls}" cx="{x(i):.1f}" cy="{cy:.1f}" r="2.5">'
                f"<title>{_esc(tip)}</title></circle>"
            )
    for change in trend.changes:
        cx = x(change.index) - (WIDTH - 2 * PAD) / max(n - 1, 1) / 2
        label = f"{short(trend.points[change.index].run)} {(change.ratio - 1) * 100:+.0f}%"
        parts.append(
            f'<line class="cp" x1="{cx:.1f}" x2="{cx:.1f}" y1="0" y2="{HEIGHT}"/>'
            f'<text class="cptext" x="{cx + 3:.1f}" y="12">{_esc(label)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def render_page(store: HistoryStore, runs: list[RunInfo], metric: str, test_filter: str) -> str:
    found, note = trends(store, runs, metric, test_filter)
    found.sort(key=lambda t: (not t.changes, t.nodeid))
    first, last = runs[0], runs[-1]
    out = [
        "<!doctype html><html><head><meta charset=utf-8>",
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        f"<title>pytest-scalene history: {_esc(metric)}</title><style>{STYLE}</style></head><body>",
        f"<h1>pytest-scalene history: {_esc(metric)}</h1>",
        f"<p class=meta>{len(runs)} runs from run {first.id} ({_esc(short(first))}, "
        f"{_when(first)}) to run {last.id} ({_esc(short(last))}, {_when(last)}); {len(found)} "
        f"tests; {sum(bool(t.changes) for t in found)} with change points. Hover a point for "
        "its run and commit; a red line marks a step, named by the first commit after it.</p>",
    ]
    if note:
        out.append(f"<p class=meta>note: {_esc(note)}</p>")
    for trend in found:
        present = [v for v in trend.values if v is not None]
        median = statistics.median(present) if present else None
        out.append(f"<h2>{_esc(trend.nodeid)}</h2>")
        out.append(
            f"<div class=meta>last {fmt_value(trend.values[-1])}, median {fmt_value(median)}</div>"
        )
        out.append(chart(trend))
        if trend.changes:
            items = "".join(f"<li>{_esc(describe_change(trend, c))}</li>" for c in trend.changes)
            out.append(f"<ul>{items}</ul>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def write_page(
    store: HistoryStore,
    runs: list[RunInfo],
    metric: str,
    test_filter: str,
    path: str | os.PathLike[str],
) -> None:
    write_text_atomic(path, render_page(store, runs, metric, test_filter))
