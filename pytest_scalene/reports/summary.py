"""The default end-of-session terminal report: one screen for a suite of any size.

Totals; how many tests were too short to measure; the costliest tests and lines of the whole
suite by CPU and by memory; each likely leak and held suspect with its test and line, and
lines that retained memory across tests; every failed budget and regression with its line; the
tests a repeat could not run again. Per test details (terminal_report.render) come with -v or
--profile-details; the JSON and HTML reports hold everything.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..core.model import SessionProfile, TestProfile
from ..core.natural_values import format_seconds
from ..core.verdict import REGRESSION
from ..gates.repeat import NOT_REPEATABLE_KEY
from ..sampling.leaks import SESSION_MIN_TESTS, SESSION_RETAINED_MB
from .leak_lines import (
    describe_held,
    describe_leak,
    describe_retained,
    held,
    likely_leaks,
    retained_lines,
)
from .terminal import INDENT, WIDTH, _num, _source, _summary, _test_peak, _verdict_text, _wrap, fit

TOP = 5  # tests and lines in each ranking
MAX_LISTED = 10  # not-repeatable tests, leaks, held suspects named before "and N more"
MIN_SHOWN = 0.005  # a test ranked under 0.005 s or MB would read as 0.00


@dataclass
class _SuiteLine:
    file: str
    line: int
    cpu_s: float = 0.0
    peak_mb: float = 0.0
    alloc_mb: float = 0.0
    test_ids: set[str] = field(default_factory=set)

    @property
    def tests(self) -> int:
        return len(self.test_ids)


def _suite_lines(tests: list[TestProfile]) -> list[_SuiteLine]:
    """Every profiled source line, its figures added up over the tests (peak: the highest) and
    over the code objects on it (a comprehension's own, before Python 3.12)."""
    found: dict[tuple[str, int], _SuiteLine] = {}
    for profile in tests:
        for key, stats in profile.lines.items():
            entry = found.setdefault((key.file, key.line), _SuiteLine(key.file, key.line))
            entry.cpu_s += stats.cpu_s
            entry.peak_mb = max(entry.peak_mb, _num(stats.extra.get("peak_mb")))
            entry.alloc_mb += _num(stats.extra.get("alloc_mb"))
            entry.test_ids.add(profile.nodeid)
    return list(found.values())


def _ranked(title: str, rows: list[str]) -> list[str]:
    return [title, *rows] if rows else []


def _top_tests(tests: list[TestProfile], width: int) -> list[str]:
    by_cpu = sorted((t for t in tests if t.cpu_s >= MIN_SHOWN), key=lambda t: -t.cpu_s)[:TOP]
    out = _ranked(
        "Top tests by CPU:",
        [
            fit(f"{INDENT}{format_seconds(t.cpu_s):>10}   {t.nodeid}", width, keep_end=True)
            for t in by_cpu
        ],
    )
    peaks = sorted(((_test_peak(t), t) for t in tests), key=lambda pt: -pt[0])
    out += _ranked(
        "Top tests by peak memory:",
        [
            fit(f"{INDENT}{peak:7.1f} MB   {t.nodeid}", width, keep_end=True)
            for peak, t in peaks[:TOP]
            if peak >= MIN_SHOWN
        ],
    )
    gpu = sorted(((_num(t.extra.get("gpu_peak_mb")), t) for t in tests), key=lambda pt: -pt[0])
    out += _ranked(
        "Top tests by GPU memory:",
        [
            fit(f"{INDENT}{peak:7.0f} MB   {t.nodeid}", width, keep_end=True)
            for peak, t in gpu[:TOP]
            if peak >= MIN_SHOWN
        ],
    )
    return out


def _line_row(entry: _SuiteLine, figure: str, rootdir: str, width: int) -> str:
    where = f"{entry.file}:{entry.line}"
    source = (_source(rootdir, entry.file, entry.line) or "").strip()
    tests = f" ({entry.tests} tests)" if entry.tests > 1 else ""
    return fit(f"{INDENT}{figure}   {where}{tests}  {source}", width)


def _top_lines(tests: list[TestProfile], rootdir: str, width: int) -> list[str]:
    lines = _suite_lines(tests)
    total_cpu = sum(t.cpu_s for t in tests) or 1.0

    def top(key: Callable[[_SuiteLine], float]) -> list[_SuiteLine]:
        return sorted((e for e in lines if key(e) > 0), key=lambda e: (-key(e), e.file, e.line))[
            :TOP
        ]

    out = _ranked(
        "Top lines by CPU (all tests):",
        [
            _line_row(
                e,
                f"{format_seconds(e.cpu_s):>10} {100 * e.cpu_s / total_cpu:3.0f}%",
                rootdir,
                width,
            )
            for e in top(lambda e: e.cpu_s)
        ],
    )
    out += _ranked(
        "Top lines by memory (highest peak; allocated, all tests):",
        [
            _line_row(e, f"{e.peak_mb:7.1f} MB {e.alloc_mb:7.1f} MB", rootdir, width)
            for e in top(lambda e: max(e.peak_mb, e.alloc_mb))
        ],
    )
    return out


def _source_text(rootdir: str, file: str, line: int) -> str:
    return (_source(rootdir, file, line) or "").strip()


def _leaks(tests: list[TestProfile], rootdir: str, width: int) -> list[str]:
    """Each likely leak and held suspect with its test and line; lines retaining memory across
    the session's tests (a leak too thin to score in any one test)."""
    out: list[str] = []
    for title, entries, describe in (
        ("Likely leaks (grew again when the test ran again):", likely_leaks, describe_leak),
        ("Held, not confirmed as leaks:", held, describe_held),
    ):
        found = [(t.nodeid, entry) for t in tests for entry in entries(t.extra)]
        rows: list[str] = []
        for nodeid, entry in found[:MAX_LISTED]:
            rows.append(fit(f"{INDENT}{nodeid}", width, keep_end=True))
            rows += _wrap(describe(entry), width, INDENT * 2, INDENT * 4)
        if len(found) > MAX_LISTED:
            more = len(found) - MAX_LISTED
            rows.append(f"{INDENT}and {more} more (--profile-json lists them all)")
        out += _ranked(title, rows)
    retained = [
        fit(
            f"{INDENT}{describe_retained(row)}  {_source_text(rootdir, row.file, row.line)}", width
        ).rstrip()
        for row in retained_lines(t.extra for t in tests)
    ]
    return out + _ranked(
        f"Memory retained across tests (>= {SESSION_RETAINED_MB:g} MB at one line,"
        f" {SESSION_MIN_TESTS}+ tests):",
        retained,
    )


def _failed_gates(tests: list[TestProfile], width: int) -> list[str]:
    out: list[str] = []
    for profile in tests:
        for verdict in profile.verdicts:
            if verdict.failed:
                label = "regressed" if verdict.kind == REGRESSION else "budget FAIL"
                out += [fit(f"{INDENT}{profile.nodeid}", width, keep_end=True)]
                out += _wrap(f"{label}: {_verdict_text(verdict)}", width, INDENT * 2, INDENT * 3)
    return _ranked("Failed gates:", out)


def _not_repeatable(tests: list[TestProfile], width: int) -> list[str]:
    found = [
        (t.nodeid, str(t.extra[NOT_REPEATABLE_KEY])) for t in tests if NOT_REPEATABLE_KEY in t.extra
    ]
    if not found:
        return []
    rows: list[str] = []
    for nodeid, note in found[:MAX_LISTED]:
        rows += _wrap(f"{nodeid}: {note}", width, INDENT, INDENT * 3)
    if len(found) > MAX_LISTED:
        rows.append(f"{INDENT}and {len(found) - MAX_LISTED} more (--profile-json lists them all)")
    title = f"{len(found)} test(s) not repeatable (their outcome is their first run's):"
    return _ranked(title, rows)


def wants_details(config: Any) -> bool:
    """The per test report (-v or --profile-details) instead of the suite's summary."""
    return bool(config.getoption("--profile-details")) or config.get_verbosity() > 0


def too_short(tests: list[TestProfile]) -> int:
    """Tests in which no sample landed on profiled code: they ran under one interval."""
    return sum(1 for t in tests if not any(s.samples for s in t.lines.values()))


def render_summary(session: SessionProfile, rootdir: str, width: int = WIDTH) -> str:
    tests = list(session.tests.values())
    blocks = [_summary(tests, width)]
    short = too_short(tests)
    if short:
        blocks.append(
            _wrap(
                f"{short} of {len(tests)} tests ran under one sampling interval"
                f" ({session.interval_s:g} s): too short to measure (no sample landed in them).",
                width,
                "",
                INDENT,
            )
        )
    blocks += [
        _top_tests(tests, width),
        _top_lines(tests, rootdir, width),
        _leaks(tests, rootdir, width),
        _failed_gates(tests, width),
        _not_repeatable(tests, width),
    ]
    tail = [
        "Per test details: -v or --profile-details; all figures: --profile-json, --profile-html."
    ]
    for note in session.notes:
        tail += _wrap(note, width, "note: ", INDENT * 3)
    blocks.append(tail)
    return "\n\n".join("\n".join(b) for b in blocks if b)


def unjudged_lines(
    unjudged: dict[str, int], status: int | None, allowed: bool, allow_option: str
) -> list[str]:
    """The last lines of the output when gates could not judge passing tests: `unjudged` counts
    them per gate; `status`: the exit status set for them (None: not set); `allowed`: the user
    let such runs pass with `allow_option`."""
    if not unjudged:
        return []
    counts = ", ".join(f"{n} by {gate}" for gate, n in unjudged.items())
    head = f"{sum(unjudged.values())} passing test(s) not judged: {counts}"
    ini_key = allow_option.removeprefix("--").replace("-", "_")
    if status is not None:
        return [
            head,
            f"the run fails with exit status {status}; the notes above say why. To let such a "
            f"run pass: {allow_option} (ini: {ini_key} = true)",
        ]
    return [f"{head} (not a failure: {allow_option} is set)" if allowed else head]
