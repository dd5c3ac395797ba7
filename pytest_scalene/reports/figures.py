"""A test's figures as the terminal reports read them (terminal_report.py per test,
terminal_summary.py for the suite), and the session's totals line that opens both."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from ..core import extra_keys
from ..core.model import LineStats, TestProfile
from ..core.natural_values import number_or_zero
from ..core.source import source_line
from ..core.verdict import BUDGET, REGRESSION, Verdict
from .leak_lines import held
from .text import INDENT, wrap

MIN_CHART_MB = 0.1  # a footprint below this has no shape worth drawing: noise at full height
num = number_or_zero


def wait_s(stats: LineStats) -> float:
    return num(stats.extra.get(extra_keys.WAIT_S))


def time_of(profile: TestProfile) -> float:
    """CPU time plus, in wall-clock mode, the time the test's lines spent waiting."""
    return profile.cpu_s + sum(wait_s(s) for s in profile.lines.values())


def peak_of(profile: TestProfile) -> float:
    peak = num(profile.extra.get(extra_keys.PEAK_MB))
    if peak or not profile.lines:  # the reports read it for every test: most have no lines
        return peak
    return max(num(s.extra.get(extra_keys.PEAK_MB)) for s in profile.lines.values())


def leaks_by_line(profile: TestProfile) -> dict[tuple[str, int], dict[str, Any]]:
    leaks = profile.extra.get(extra_keys.LEAKS) or []
    return {
        (str(leak.get("file")), int(leak.get("line", 0))): leak
        for leak in leaks
        if isinstance(leak, dict)
    }


def chartable(extra: dict[str, Any]) -> list[Any]:
    """The "timeline" in `extra` when it reaches MIN_CHART_MB, else []."""
    timeline = extra.get(extra_keys.TIMELINE)
    if not isinstance(timeline, (list, tuple)) or not timeline:
        return []
    return list(timeline) if max(num(p[1]) for p in timeline) >= MIN_CHART_MB else []


def source_text(rootdir: str, file: str, line: int) -> str | None:
    """The source line without its newline, or None when the file or line does not exist."""
    text = source_line(rootdir, file, line)
    return text.rstrip("\r\n").expandtabs(4).rstrip() if text else None


def verdict_text(verdict: Verdict) -> str:
    if verdict.message:
        return verdict.message
    return f"{verdict.metric} = {verdict.value} (limit {verdict.limit})"


def verdict_kind(verdict: Verdict) -> str:
    return REGRESSION if verdict.kind == REGRESSION else BUDGET


class SessionTotals(NamedTuple):
    """The session's figures that open both terminal reports, added up in one pass over its
    tests (a pass per figure cost a suite of millisecond tests ~2 k instructions a test each:
    docs/benchmarks-ms-suite.md)."""

    tests: int
    elapsed_s: float
    cpu_s: float
    python_s: float
    native_s: float
    system_s: float
    highest_peak_mb: float
    judged: dict[str, list[int]]  # BUDGET or REGRESSION -> [failed, judged]
    leaks: int
    held: int


def session_totals(tests: Sequence[TestProfile], peaks: Sequence[float]) -> SessionTotals:
    """`peaks`: each test's peak_of, in the order of `tests`."""
    elapsed = cpu = python = native = system = 0.0
    judged = {BUDGET: [0, 0], REGRESSION: [0, 0]}
    leaks = kept = 0
    for t in tests:
        elapsed += t.elapsed_s
        cpu += t.cpu_python_s + t.cpu_native_s + t.cpu_system_s
        python += t.cpu_python_s
        native += t.cpu_native_s
        system += t.cpu_system_s
        for verdict in t.verdicts:
            counts = judged[verdict_kind(verdict)]
            counts[0] += verdict.failed
            counts[1] += 1
        extra = t.extra  # tests without an entry are skipped by a lookup
        if extra.get(extra_keys.LEAKS):
            leaks += len(leaks_by_line(t))
        if extra.get(extra_keys.HELD):
            kept += len(held(extra))
    peak = max(peaks, default=0.0)
    return SessionTotals(
        len(tests), elapsed, cpu, python, native, system, peak, judged, leaks, kept
    )


def session_line(totals: SessionTotals, width: int) -> list[str]:
    """The session's totals, wrapped between its phrases to `width` columns."""
    n, cpu = totals.tests, totals.cpu_s
    parts = [f"{n} test{'s' if n != 1 else ''} profiled"]
    parts.append(f"time {totals.elapsed_s:.2f} s")
    parts.append(f"cpu {cpu:.2f} s")
    if cpu > 0:
        parts[-1] += (
            f" (python {100 * totals.python_s / cpu:.0f}%"
            f" native {100 * totals.native_s / cpu:.0f}%"
            f" system {100 * totals.system_s / cpu:.0f}%)"
        )
    if totals.highest_peak_mb:
        parts.append(f"highest peak {totals.highest_peak_mb:.1f} MB")
    for kind, name in ((BUDGET, "budgets"), (REGRESSION, "baseline comparisons")):
        failed, judged = totals.judged[kind]
        if judged:
            parts.append(f"{name} {failed} failed of {judged}")
    if totals.leaks:
        parts.append(f"{totals.leaks} likely leak{'s' if totals.leaks != 1 else ''}")
    if totals.held:
        parts.append(f"{totals.held} held (not confirmed as leaks)")
    return wrap("  ".join(parts), width, "", INDENT)
