"""The end-of-session terminal report: a summary, then per test a header (time, peak, memory
sparkline, verdicts, leaks) and only the lines that matter, with their source text.

As in Scalene, a line is shown when it has >= 1% of the test's time or memory, with the line
before and after it as context, and the whole report shows at most MAX_ROWS source lines whatever
the size of the suite: the costliest lines win. Every line of the report fits `width` columns
(text.py): test ids and paths are cut in their middle, source text at its end, and a line
table's figures are never cut.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..core import extra_keys
from ..core.model import LineKey, LineStats, SessionProfile, TestProfile
from ..core.natural_values import format_seconds
from .figures import (
    chartable,
    leaks_by_line,
    num,
    peak_of,
    session_line,
    session_totals,
    source_text,
    time_of,
    verdict_kind,
    verdict_text,
    wait_s,
)
from .leak_lines import describe_held, describe_leak, held
from .sparkline import timeline_sparkline
from .text import INDENT, WIDTH, display_width, fit, pad, shorten, shorten_id, wrap

MIN_SHARE = 0.01  # lines under 1% of the test's time and memory are left out, as in Scalene
MAX_ROWS = 300  # source lines in the whole report, context lines included
TEST_SPARK_WIDTH = 40
LINE_SPARK_WIDTH = 10
MIN_SOURCE_WIDTH = 16
# A verdict's label by (kind, passed), each 11 wide: budgets apart from baseline comparisons.
VERDICT_LABELS = {
    ("budget", False): "budget FAIL",
    ("budget", True): "budget ok  ",
    ("regression", False): "regressed  ",
    ("regression", True): "baseline ok",
}


def _score(profile: TestProfile, stats: LineStats, totals: tuple[float, float, float]) -> float:
    """The line's largest share of the test's time, peak memory or allocated bytes."""
    time_total, peak_total, alloc_total = totals
    shares = [0.0]
    if time_total > 0:
        shares.append((stats.cpu_s + wait_s(stats)) / time_total)
    if peak_total > 0:
        shares.append(num(stats.extra.get(extra_keys.PEAK_MB)) / peak_total)
    if alloc_total > 0:
        shares.append(num(stats.extra.get(extra_keys.ALLOC_MB)) / alloc_total)
    return max(shares)


def _totals(profile: TestProfile) -> tuple[float, float, float]:
    alloc = sum(num(s.extra.get(extra_keys.ALLOC_MB)) for s in profile.lines.values())
    return time_of(profile), peak_of(profile), alloc


def _pct(value: float) -> str:
    return f"{100 * value:.0f}%" if value > 0 else ""


def _fixed(value: float, digits: int = 1) -> str:
    return f"{value:.{digits}f}" if value > 0 else ""


# -- columns ---------------------------------------------------------------------------------
Cell = Callable[[LineKey, LineStats], str]


@dataclass
class _Column:
    title: str  # two header rows, split at "\n", so that the columns stay narrow
    cell: Cell


def _columns(profile: TestProfile) -> list[_Column]:
    """The figure columns this test has data for."""
    lines = list(profile.lines.values())
    total = time_of(profile) or 1.0

    def has(name: str) -> bool:
        return any(name in s.extra for s in lines)

    columns = [
        _Column("py%", lambda k, s: _pct(s.cpu_python_s / total)),
        _Column("nat%", lambda k, s: _pct(s.cpu_native_s / total)),
        _Column("sys%", lambda k, s: _pct(s.cpu_system_s / total)),
    ]
    if has("wait_s"):
        columns.append(_Column("wait\n%", lambda k, s: _pct(wait_s(s) / total)))
    if has("peak_mb"):
        columns.append(
            _Column("peak\nMB", lambda k, s: _fixed(num(s.extra.get(extra_keys.PEAK_MB))))
        )
    if has("alloc_mb"):
        columns.append(
            _Column("alloc\nMB", lambda k, s: _fixed(num(s.extra.get(extra_keys.ALLOC_MB))))
        )
    if has("python_alloc_fraction"):

        def python_share(k: LineKey, s: LineStats) -> str:
            if extra_keys.PYTHON_ALLOC_FRACTION not in s.extra:
                return ""
            return f"{100 * num(s.extra[extra_keys.PYTHON_ALLOC_FRACTION]):.0f}%"

        columns.append(_Column("py\nmem", python_share))
    if has("copy_mb_s"):
        columns.append(
            _Column("copy\nMB/s", lambda k, s: _fixed(num(s.extra.get(extra_keys.COPY_MB_S))))
        )
    leaks = leaks_by_line(profile)
    if leaks:

        def leak(k: LineKey, s: LineStats) -> str:
            found = leaks.get((k.file, k.line))
            return _pct(num(found.get("probability"))) if found else ""

        columns.append(_Column("leak\nprob", leak))
    if has("gpu_util_percent"):
        columns.append(
            _Column(
                "gpu\n%", lambda k, s: _pct(num(s.extra.get(extra_keys.GPU_UTIL_PERCENT)) / 100)
            )
        )
    if has("gpu_peak_mb"):
        columns.append(
            _Column("gpu\nMB", lambda k, s: _fixed(num(s.extra.get(extra_keys.GPU_PEAK_MB)), 0))
        )
    return columns


# -- selection -------------------------------------------------------------------------------
Position = tuple[str, int]  # (file, line)


@dataclass
class _Selection:
    rows: list[set[Position]]  # per test
    omitted: int = 0


def _select(tests: list[TestProfile], rootdir: str, top: int | None, max_rows: int) -> _Selection:
    """Per test the source positions to show: the lines that matter and their neighbours, the
    costliest first until the report holds `max_rows` positions."""
    candidates: list[tuple[float, int, LineKey]] = []
    for index, profile in enumerate(tests):
        totals = _totals(profile)
        leaks = leaks_by_line(profile)  # a likely leak is always shown, whatever its size so far
        scored = [
            (1.0 if (k.file, k.line) in leaks else _score(profile, s, totals), k)
            for k, s in profile.lines.items()
        ]
        scored = sorted((sk for sk in scored if sk[0] >= MIN_SHARE), key=lambda sk: -sk[0])
        candidates += [(score, index, key) for score, key in scored[:top]]
    candidates.sort(key=lambda c: (-c[0], c[1], c[2]))
    selection = _Selection(rows=[set() for _ in tests])
    used = 0
    for _, index, key in candidates:
        rows = selection.rows[index]
        wanted = {(key.file, key.line)}
        for neighbour in (key.line - 1, key.line + 1):
            if neighbour >= 1 and source_text(rootdir, key.file, neighbour) is not None:
                wanted.add((key.file, neighbour))
        new = wanted - rows
        if used + len(new) > max_rows:
            selection.omitted += 1
            continue
        rows |= new
        used += len(new)
    return selection


# -- rendering -------------------------------------------------------------------------------
def _header(profile: TestProfile, width: int) -> list[str]:
    outcome = f"  [{profile.outcome}]"  # the outcome stays: the id is cut in its middle
    out = [shorten_id(profile.nodeid, width - display_width(outcome)) + outcome]
    cpu = profile.cpu_s
    figures = [f"time {profile.elapsed_s:.2f} s", f"cpu {format_seconds(cpu)}"]
    if profile.calls:  # benchmark/calls.py: CPU figures per call of the function
        figures[-1] += f" per call ({profile.calls} calls)"
    if cpu > 0:
        figures[-1] += (
            f" (python {100 * profile.cpu_python_s / cpu:.0f}%"
            f" native {100 * profile.cpu_native_s / cpu:.0f}%"
            f" system {100 * profile.cpu_system_s / cpu:.0f}%)"
        )
    wait = sum(wait_s(s) for s in profile.lines.values())
    if wait > 0:
        figures.append(f"wait {wait:.2f} s")
    peak = peak_of(profile)
    if peak > 0 or extra_keys.PEAK_MB in profile.extra:
        figures.append(f"peak {peak:.1f} MB")
    if extra_keys.GPU_PEAK_MB in profile.extra:
        figures.append(f"gpu {num(profile.extra[extra_keys.GPU_PEAK_MB]):.0f} MB")
    if extra_keys.INSTRUCTIONS in profile.extra:
        figures.append(f"instructions {num(profile.extra[extra_keys.INSTRUCTIONS]) / 1e6:,.3f} M")
    out += wrap("  ".join(figures), width, INDENT, INDENT * 2)

    timeline = chartable(profile.extra)
    if timeline:
        end = max(profile.elapsed_s, max(num(p[0]) for p in timeline))
        high = max(num(p[1]) for p in timeline)
        scale = f"  0-{high:.1f} MB over {end:.2f} s"
        # A narrow terminal gets a narrower chart, not a cut scale.
        room = width - display_width(f"{INDENT}memory {scale}")
        spark = timeline_sparkline(timeline, max(1, min(TEST_SPARK_WIDTH, room)), 0.0, end)
        out.append(f"{INDENT}memory {spark}{scale}")

    for verdict in profile.verdicts:
        label = VERDICT_LABELS[verdict_kind(verdict), verdict.passed]
        out += wrap(verdict_text(verdict), width, f"{INDENT}{label} ", INDENT + " " * 12)
    for _, leak in sorted(leaks_by_line(profile).items()):
        out += wrap(describe_leak(leak), width, f"{INDENT}leak        ", INDENT + " " * 12)
    for entry in held(profile.extra):
        out += wrap(describe_held(entry), width, f"{INDENT}held        ", INDENT + " " * 12)
    return out


def _table(profile: TestProfile, positions: set[Position], rootdir: str, width: int) -> list[str]:
    by_position: dict[Position, list[tuple[LineKey, LineStats]]] = {}
    for key, stats in profile.lines.items():
        by_position.setdefault((key.file, key.line), []).append((key, stats))
    blank = LineStats()
    rows: list[tuple[str, int, LineKey, LineStats]] = []
    for file, line in sorted(positions):
        found = by_position.get((file, line)) or [(LineKey(file, line, ""), blank)]
        rows += [(file, line, key, stats) for key, stats in sorted(found, key=lambda ks: ks[0])]

    columns = _columns(profile)
    cells = [[col.cell(key, stats) for col in columns] for _, _, key, stats in rows]
    widths = [
        max(
            [display_width(t) for t in col.title.split("\n")] + [display_width(r[i]) for r in cells]
        )
        for i, col in enumerate(columns)
    ]
    line_width = max(4, *(len(str(line)) for _, line, _, _ in rows))
    spark = any(chartable(s.extra) for s in profile.lines.values())
    fixed = len(INDENT) + line_width + sum(w + 1 for w in widths) + 1
    if spark and width - fixed - LINE_SPARK_WIDTH - 1 < MIN_SOURCE_WIDTH:
        spark = False  # the source text matters more than the per-line sparkline
    if spark:
        fixed += LINE_SPARK_WIDTH + 1
    source_width = max(0, width - fixed)  # the figures stay whole; the source text gives way
    end = max(
        [profile.elapsed_s] + [num(p[0]) for p in profile.extra.get(extra_keys.TIMELINE) or []]
    )

    def row(line: str, figures: Iterable[str], memory: str, source: str) -> str:
        parts = [pad(line, line_width, True)]
        parts += [pad(f, w, True) for f, w in zip(figures, widths, strict=False)]
        if spark:
            parts.append(pad(memory, LINE_SPARK_WIDTH, False))
        parts.append(fit(source, source_width))
        return (INDENT + " ".join(parts)).rstrip()

    titles = [c.title.split("\n") if "\n" in c.title else ["", c.title] for c in columns]
    two_rows = any(top for top, _ in titles)
    out = [row("", (top for top, _ in titles), "", "")] if two_rows else []
    out.append(row("line", (bottom for _, bottom in titles), "memory", "source"))
    previous: Position | None = None
    for (file, line, _, stats), figures in zip(rows, cells, strict=True):
        if previous is None or previous[0] != file:
            out.append(INDENT + shorten(file, width - len(INDENT)))
        elif line > previous[1] + 1:
            out.append(row("⋮", [], "", ""))
        timeline = chartable(stats.extra)
        memory = timeline_sparkline(timeline, LINE_SPARK_WIDTH, 0.0, end, zero=" ")
        out.append(row(str(line), figures, memory, source_text(rootdir, file, line) or ""))
        previous = (file, line)
    return out


def render_test(
    profile: TestProfile, rootdir: str, positions: set[Position], width: int = WIDTH
) -> str:
    out = _header(profile, width)
    if positions:
        out += _table(profile, positions, rootdir, width)
    elif profile.lines:
        out += wrap("(no line in profiled code reached 1% of the test)", width, INDENT, INDENT)
    else:
        why = "(no sample in profiled code: the test ran under one interval)"
        out += wrap(why, width, INDENT, INDENT)
    return "\n".join(out)


def render(
    session: SessionProfile,
    rootdir: str,
    top: int | None = None,
    width: int = WIDTH,
    max_rows: int = MAX_ROWS,
) -> str:
    """The report. `top`: at most this many lines per test (plus their neighbours)."""
    tests = list(session.tests.values())
    selection = _select(tests, rootdir, top, max_rows)
    totals = session_totals(tests, [peak_of(t) for t in tests])
    blocks = ["\n".join(session_line(totals, width))]
    blocks += [
        render_test(t, rootdir, rows, width) for t, rows in zip(tests, selection.rows, strict=True)
    ]
    tail: list[str] = []
    if selection.omitted:
        tail += wrap(
            f"{selection.omitted} more line(s) over 1% left out: the report shows at most"
            f" {max_rows} source lines (--profile-top=N shows the N costliest per test;"
            " --profile-json and --profile-html have them all).",
            width,
            "",
            INDENT,
        )
    for note in session.notes:
        tail += wrap(note, width, "note: ", INDENT * 3)
    if tail:
        blocks.append("\n".join(tail))
    return "\n\n".join(blocks)
