"""A test's figures as the terminal reports read them (terminal_report.py per test,
terminal_summary.py for the suite), and the session's totals line that opens both."""

from __future__ import annotations

from typing import Any

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


def session_line(
    tests: list[TestProfile], width: int, peaks: list[float] | None = None
) -> list[str]:
    """The session's totals, wrapped between its phrases to `width` columns; `peaks`: each
    test's peak_of, where the caller has them."""
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
    if peaks is None:
        peaks = [peak_of(t) for t in tests]
    if any(peaks):
        parts.append(f"highest peak {max(peaks):.1f} MB")
    verdicts = [v for t in tests for v in t.verdicts]
    for kind, name in ((BUDGET, "budgets"), (REGRESSION, "baseline comparisons")):
        judged = [v for v in verdicts if verdict_kind(v) == kind]
        if judged:
            failed = sum(1 for v in judged if v.failed)
            parts.append(f"{name} {failed} failed of {len(judged)}")
    # Per test, the summary's cost grows with the suite: tests without an entry are skipped
    # by a lookup (a suite of millisecond tests paid for the calls: docs/benchmarks-ms-suite.md).
    leaks = sum(len(leaks_by_line(t)) for t in tests if t.extra.get(extra_keys.LEAKS))
    if leaks:
        parts.append(f"{leaks} likely leak{'s' if leaks != 1 else ''}")
    kept = sum(len(held(t.extra)) for t in tests if t.extra.get(extra_keys.HELD))
    if kept:
        parts.append(f"{kept} held (not confirmed as leaks)")
    return wrap("  ".join(parts), width, "", INDENT)
