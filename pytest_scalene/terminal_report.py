"""The end-of-session terminal report: per test a header, then the lines that matter."""

from __future__ import annotations

import linecache
import os
from collections.abc import Callable

from tabulate import tabulate

from .model import LineKey, LineStats, SessionProfile, TestProfile

MIN_SHARE = 0.01  # lines under 1% of the test's CPU time (and memory) are left out, as in Scalene
SOURCE_WIDTH = 34


def _source(rootdir: str, key: LineKey) -> str:
    path = key.file if os.path.isabs(key.file) else os.path.join(rootdir, key.file)
    text = linecache.getline(path, key.line).strip()
    return text if len(text) <= SOURCE_WIDTH else text[: SOURCE_WIDTH - 1] + "…"


def _matters(profile: TestProfile, stats: LineStats) -> bool:
    total_cpu = profile.cpu_s
    if total_cpu > 0 and stats.cpu_s / total_cpu >= MIN_SHARE:
        return True
    peak = profile.extra.get("peak_mb") or 0.0
    return bool(peak) and (stats.extra.get("peak_mb") or 0.0) >= MIN_SHARE * peak


def _header(profile: TestProfile) -> str:
    parts = [
        f"{profile.nodeid} [{profile.outcome}]",
        f"{profile.elapsed_s:.2f}s",
        f"cpu {profile.cpu_s:.2f}s (python {profile.cpu_python_s:.2f}"
        f" native {profile.cpu_native_s:.2f} system {profile.cpu_system_s:.2f})",
    ]
    if "peak_mb" in profile.extra:
        parts.append(f"peak {profile.extra['peak_mb']:.1f} MB")
    return "  ".join(parts)


Column = tuple[str, Callable[[TestProfile, LineStats], str]]


def _columns(profile: TestProfile) -> list[Column]:
    total = profile.cpu_s or 1.0
    columns: list[Column] = [
        ("python s", lambda p, s: f"{s.cpu_python_s:.3f}"),
        ("native s", lambda p, s: f"{s.cpu_native_s:.3f}"),
        ("sys s", lambda p, s: f"{s.cpu_system_s:.3f}"),
        ("cpu %", lambda p, s: f"{100 * s.cpu_s / total:.0f}"),
    ]
    if any("peak_mb" in s.extra for s in profile.lines.values()):
        columns += [
            ("peak MB", lambda p, s: f"{s.extra.get('peak_mb', 0.0):.1f}"),
            ("py mem %", lambda p, s: f"{100 * s.extra.get('python_alloc_fraction', 0.0):.0f}"),
            ("copy MB/s", lambda p, s: f"{s.extra.get('copy_mb_s', 0.0):.0f}"),
        ]
    if any("gpu_util_percent" in s.extra for s in profile.lines.values()):
        columns += [
            ("gpu %", lambda p, s: f"{s.extra.get('gpu_util_percent', 0.0):.0f}"),
            ("gpu MB", lambda p, s: f"{s.extra.get('gpu_peak_mb', 0.0):.0f}"),
        ]
    return columns


def render_test(profile: TestProfile, rootdir: str, top: int | None = None) -> str:
    rows = [(k, s) for k, s in profile.lines.items() if _matters(profile, s)]
    if top is not None:
        rows = sorted(rows, key=lambda ks: ks[1].cpu_s, reverse=True)[:top]
    rows.sort(key=lambda ks: ks[0])
    if not rows:
        return _header(profile) + "\n  (no line in profiled code reached 1% of the test)"
    columns = _columns(profile)
    table = [
        [f"{k.file}:{k.line}", *(fmt(profile, s) for _, fmt in columns), _source(rootdir, k)]
        for k, s in rows
    ]
    headers = ["line", *(name for name, _ in columns), "source"]
    body = tabulate(table, headers=headers, tablefmt="simple", disable_numparse=True)
    return _header(profile) + "\n" + "\n".join("  " + row for row in body.splitlines())


def render(session: SessionProfile, rootdir: str, top: int | None = None) -> str:
    blocks = [render_test(t, rootdir, top) for t in session.tests.values()]
    notes = [f"note: {n}" for n in session.notes]
    return "\n\n".join(blocks + (["\n".join(notes)] if notes else []))
