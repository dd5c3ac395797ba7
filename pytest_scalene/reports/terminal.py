"""The end-of-session terminal report: a summary, then per test a header (time, peak, memory
sparkline, verdicts, leaks) and only the lines that matter, with their source text.

As in Scalene, a line is shown when it has >= 1% of the test's time or memory, with the line
before and after it as context, and the whole report shows at most MAX_ROWS source lines whatever
the size of the suite: the costliest lines win. Every line of the report fits `width` columns.
"""

from __future__ import annotations

import textwrap
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..core.model import LineKey, LineStats, SessionProfile, TestProfile
from ..core.natural_values import format_seconds, number_or_zero
from ..core.source import source_line
from ..core.verdict import BUDGET, REGRESSION, Verdict
from .leak_lines import describe_held, describe_leak, held
from .sparkline import timeline_sparkline

WIDTH = 100
MIN_SHARE = 0.01  # lines under 1% of the test's time and memory are left out, as in Scalene
MAX_ROWS = 300  # source lines in the whole report, context lines included
TEST_SPARK_WIDTH = 40
LINE_SPARK_WIDTH = 10
MIN_SOURCE_WIDTH = 16
MIN_CHART_MB = 0.1  # a footprint below this has no shape worth drawing: noise at full height
INDENT = "  "
# A verdict's label by (kind, passed), each 11 wide: budgets apart from baseline comparisons.
VERDICT_LABELS = {
    ("budget", False): "budget FAIL",
    ("budget", True): "budget ok  ",
    ("regression", False): "regressed  ",
    ("regression", True): "baseline ok",
}


# -- text width ------------------------------------------------------------------------------
def display_width(text: str) -> int:
    """Terminal columns `text` takes: East Asian wide characters take two, combining marks none."""
    width = 0
    for char in text:
        if unicodedata.combining(char):
            continue
        width += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return width


def fit(text: str, width: int, keep_end: bool = False) -> str:
    """`text` cut to `width` columns with an ellipsis (at the start when `keep_end`)."""
    if display_width(text) <= width:
        return text
    if width <= 0:
        return ""
    out: list[str] = []
    used = 1  # the ellipsis
    for char in reversed(text) if keep_end else text:
        w = display_width(char)
        if used + w > width:
            break
        out.append(char)
        used += w
    return "…" + "".join(reversed(out)) if keep_end else "".join(out) + "…"


def _pad(text: str, width: int, right: bool) -> str:
    gap = " " * max(0, width - display_width(text))
    return gap + text if right else text + gap


def _wrap(text: str, width: int, first: str, rest: str) -> list[str]:
    return textwrap.wrap(
        text, width=width, initial_indent=first, subsequent_indent=rest, break_on_hyphens=False
    ) or [first.rstrip()]


# -- figures ---------------------------------------------------------------------------------
_num = number_or_zero


def _wait_s(stats: LineStats) -> float:
    return _num(stats.extra.get("wait_s"))


def _test_time(profile: TestProfile) -> float:
    """CPU time plus, in wall-clock mode, the time the test's lines spent waiting."""
    return profile.cpu_s + sum(_wait_s(s) for s in profile.lines.values())


def _test_peak(profile: TestProfile) -> float:
    peak = _num(profile.extra.get("peak_mb"))
    return peak or max((_num(s.extra.get("peak_mb")) for s in profile.lines.values()), default=0.0)


def _score(profile: TestProfile, stats: LineStats, totals: tuple[float, float, float]) -> float:
    """The line's largest share of the test's time, peak memory or allocated bytes."""
    time_total, peak_total, alloc_total = totals
    shares = [0.0]
    if time_total > 0:
        shares.append((stats.cpu_s + _wait_s(stats)) / time_total)
    if peak_total > 0:
        shares.append(_num(stats.extra.get("peak_mb")) / peak_total)
    if alloc_total > 0:
        shares.append(_num(stats.extra.get("alloc_mb")) / alloc_total)
    return max(shares)


def _totals(profile: TestProfile) -> tuple[float, float, float]:
    alloc = sum(_num(s.extra.get("alloc_mb")) for s in profile.lines.values())
    return _test_time(profile), _test_peak(profile), alloc


def _leaks(profile: TestProfile) -> dict[tuple[str, int], dict[str, Any]]:
    leaks = profile.extra.get("leaks") or []
    return {
        (str(leak.get("file")), int(leak.get("line", 0))): leak
        for leak in leaks
        if isinstance(leak, dict)
    }


def _chartable(extra: dict[str, Any]) -> list[Any]:
    """The "timeline" in `extra` when it reaches MIN_CHART_MB, else []."""
    timeline = extra.get("timeline")
    if not isinstance(timeline, list) or not timeline:
        return []
    return timeline if max(_num(p[1]) for p in timeline) >= MIN_CHART_MB else []


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
    total = _test_time(profile) or 1.0

    def has(name: str) -> bool:
        return any(name in s.extra for s in lines)

    columns = [
        _Column("py%", lambda k, s: _pct(s.cpu_python_s / total)),
        _Column("nat%", lambda k, s: _pct(s.cpu_native_s / total)),
        _Column("sys%", lambda k, s: _pct(s.cpu_system_s / total)),
    ]
    if has("wait_s"):
        columns.append(_Column("wait\n%", lambda k, s: _pct(_wait_s(s) / total)))
    if has("peak_mb"):
        columns.append(_Column("peak\nMB", lambda k, s: _fixed(_num(s.extra.get("peak_mb")))))
    if has("alloc_mb"):
        columns.append(_Column("alloc\nMB", lambda k, s: _fixed(_num(s.extra.get("alloc_mb")))))
    if has("python_alloc_fraction"):

        def python_share(k: LineKey, s: LineStats) -> str:
            if "python_alloc_fraction" not in s.extra:
                return ""
            return f"{100 * _num(s.extra['python_alloc_fraction']):.0f}%"

        columns.append(_Column("py\nmem", python_share))
    if has("copy_mb_s"):
        columns.append(_Column("copy\nMB/s", lambda k, s: _fixed(_num(s.extra.get("copy_mb_s")))))
    leaks = _leaks(profile)
    if leaks:

        def leak(k: LineKey, s: LineStats) -> str:
            found = leaks.get((k.file, k.line))
            return _pct(_num(found.get("probability"))) if found else ""

        columns.append(_Column("leak\nprob", leak))
    if has("gpu_util_percent"):
        columns.append(
            _Column("gpu\n%", lambda k, s: _pct(_num(s.extra.get("gpu_util_percent")) / 100))
        )
    if has("gpu_peak_mb"):
        columns.append(_Column("gpu\nMB", lambda k, s: _fixed(_num(s.extra.get("gpu_peak_mb")), 0)))
    return columns


# -- selection -------------------------------------------------------------------------------
def _source(rootdir: str, file: str, line: int) -> str | None:
    """The source line without its newline, or None when the file or line does not exist."""
    text = source_line(rootdir, file, line)
    return text.rstrip("\r\n").expandtabs(4).rstrip() if text else None


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
        leaks = _leaks(profile)  # a likely leak is always shown, whatever its size so far
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
            if neighbour >= 1 and _source(rootdir, key.file, neighbour) is not None:
                wanted.add((key.file, neighbour))
        new = wanted - rows
        if used + len(new) > max_rows:
            selection.omitted += 1
            continue
        rows |= new
        used += len(new)
    return selection


# -- rendering -------------------------------------------------------------------------------
def _verdict_text(verdict: Verdict) -> str:
    if verdict.message:
        return verdict.message
    return f"{verdict.metric} = {verdict.value} (limit {verdict.limit})"


def _verdict_kind(verdict: Verdict) -> str:
    return REGRESSION if verdict.kind == REGRESSION else BUDGET


def _header(profile: TestProfile, width: int) -> list[str]:
    out = [fit(f"{profile.nodeid}  [{profile.outcome}]", width, keep_end=True)]
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
    wait = sum(_wait_s(s) for s in profile.lines.values())
    if wait > 0:
        figures.append(f"wait {wait:.2f} s")
    peak = _test_peak(profile)
    if peak > 0 or "peak_mb" in profile.extra:
        figures.append(f"peak {peak:.1f} MB")
    if "gpu_peak_mb" in profile.extra:
        figures.append(f"gpu {_num(profile.extra['gpu_peak_mb']):.0f} MB")
    if "instructions" in profile.extra:
        figures.append(f"instructions {_num(profile.extra['instructions']) / 1e6:,.3f} M")
    out += _wrap("  ".join(figures), width, INDENT, INDENT * 2)

    timeline = _chartable(profile.extra)
    if timeline:
        end = max(profile.elapsed_s, max(_num(p[0]) for p in timeline))
        spark = timeline_sparkline(timeline, TEST_SPARK_WIDTH, 0.0, end)
        high = max(_num(p[1]) for p in timeline)
        out.append(fit(f"{INDENT}memory {spark}  0-{high:.1f} MB over {end:.2f} s", width))

    for verdict in profile.verdicts:
        label = VERDICT_LABELS[_verdict_kind(verdict), verdict.passed]
        out += _wrap(_verdict_text(verdict), width, f"{INDENT}{label} ", INDENT + " " * 12)
    for _, leak in sorted(_leaks(profile).items()):
        out += _wrap(describe_leak(leak), width, f"{INDENT}leak        ", INDENT + " " * 12)
    for entry in held(profile.extra):
        out += _wrap(describe_held(entry), width, f"{INDENT}held        ", INDENT + " " * 12)
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
    spark = any(_chartable(s.extra) for s in profile.lines.values())
    fixed = len(INDENT) + line_width + sum(w + 1 for w in widths) + 1
    if spark and width - fixed - LINE_SPARK_WIDTH - 1 < MIN_SOURCE_WIDTH:
        spark = False  # the source text matters more than the per-line sparkline
    if spark:
        fixed += LINE_SPARK_WIDTH + 1
    source_width = max(MIN_SOURCE_WIDTH, width - fixed)
    end = max([profile.elapsed_s] + [_num(p[0]) for p in profile.extra.get("timeline") or []])

    def row(line: str, figures: Iterable[str], memory: str, source: str) -> str:
        parts = [_pad(line, line_width, True)]
        parts += [_pad(f, w, True) for f, w in zip(figures, widths, strict=False)]
        if spark:
            parts.append(_pad(memory, LINE_SPARK_WIDTH, False))
        parts.append(fit(source, source_width))
        return fit((INDENT + " ".join(parts)).rstrip(), width)

    titles = [c.title.split("\n") if "\n" in c.title else ["", c.title] for c in columns]
    two_rows = any(top for top, _ in titles)
    out = [row("", (top for top, _ in titles), "", "")] if two_rows else []
    out.append(row("line", (bottom for _, bottom in titles), "memory", "source"))
    previous: Position | None = None
    for (file, line, _, stats), figures in zip(rows, cells, strict=True):
        if previous is None or previous[0] != file:
            out.append(fit(f"{INDENT}{file}", width, keep_end=True))
        elif line > previous[1] + 1:
            out.append(row("⋮", [], "", ""))
        timeline = _chartable(stats.extra)
        memory = timeline_sparkline(timeline, LINE_SPARK_WIDTH, 0.0, end, zero=" ")
        out.append(row(str(line), figures, memory, _source(rootdir, file, line) or ""))
        previous = (file, line)
    return out


def _summary(tests: list[TestProfile], width: int) -> list[str]:
    cpu = sum(t.cpu_s for t in tests)
    parts = [f"{len(tests)} test{'s' if len(tests) != 1 else ''} profiled"]
    parts.append(f"time {sum(t.elapsed_s for t in tests):.2f} s")
    parts.append(f"cpu {cpu:.2f} s")
    if cpu > 0:
        parts[-1] += (
            f" (python {100 * sum(t.cpu_python_s for t in tests) / cpu:.0f}%"
            f" native {100 * sum(t.cpu_native_s for t in tests) / cpu:.0f}%"
            f" system {100 * sum(t.cpu_system_s for t in tests) / cpu:.0f}%)"
        )
    peaks = [_test_peak(t) for t in tests]
    if any(peaks):
        parts.append(f"highest peak {max(peaks):.1f} MB")
    verdicts = [v for t in tests for v in t.verdicts]
    for kind, name in ((BUDGET, "budgets"), (REGRESSION, "baseline comparisons")):
        judged = [v for v in verdicts if _verdict_kind(v) == kind]
        if judged:
            failed = sum(1 for v in judged if v.failed)
            parts.append(f"{name} {failed} failed of {len(judged)}")
    leaks = sum(len(_leaks(t)) for t in tests)
    if leaks:
        parts.append(f"{leaks} likely leak{'s' if leaks != 1 else ''}")
    kept = sum(len(held(t.extra)) for t in tests)
    if kept:
        parts.append(f"{kept} held (not confirmed as leaks)")
    return _wrap("  ".join(parts), width, "", INDENT)


def render_test(
    profile: TestProfile, rootdir: str, positions: set[Position], width: int = WIDTH
) -> str:
    out = _header(profile, width)
    if positions:
        out += _table(profile, positions, rootdir, width)
    elif profile.lines:
        out.append(f"{INDENT}(no line in profiled code reached 1% of the test)")
    else:
        out.append(f"{INDENT}(no sample in profiled code: the test ran under one interval)")
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
    blocks = ["\n".join(_summary(tests, width))]
    blocks += [
        render_test(t, rootdir, rows, width) for t, rows in zip(tests, selection.rows, strict=True)
    ]
    tail: list[str] = []
    if selection.omitted:
        tail += _wrap(
            f"{selection.omitted} more line(s) over 1% left out: the report shows at most"
            f" {max_rows} source lines (--profile-top=N shows the N costliest per test;"
            " --profile-json and --profile-html have them all).",
            width,
            "",
            INDENT,
        )
    for note in session.notes:
        tail += _wrap(note, width, "note: ", INDENT * 3)
    if tail:
        blocks.append("\n".join(tail))
    return "\n\n".join(blocks)
