"""The default end-of-session terminal report: one screen for a suite of any size.

Totals; how many tests were too short to measure; the costliest tests and lines of the whole
suite by CPU and by memory; each likely leak and held suspect with its test and line, and
lines that retained memory across tests; every failed budget and regression with its line; the
tests a repeat could not run again. Per test details (terminal_report.render) come with -v;
the JSON and HTML reports hold everything.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..core import extra_keys
from ..core.model import SessionProfile, TestProfile
from ..core.natural_values import format_seconds
from ..core.verdict import REGRESSION
from ..sampling.leaks import SESSION_MIN_TESTS, SESSION_RETAINED_MB, SessionLine
from .figures import num, peak_of, session_line, session_totals, source_text, verdict_text
from .leak_lines import (
    describe_held,
    describe_leak,
    describe_retained,
    held,
    likely_leaks,
    retained_lines,
)
from .text import INDENT, WIDTH, display_width, fit, shorten, shorten_id, wrap

TOP = 5  # tests and lines in each ranking
MAX_LISTED = 10  # not-repeatable tests, leaks, held suspects named before "and N more"
MIN_PATH = 30  # a path cut for the source text after it keeps this much
MIN_SHOWN = 0.005  # a test ranked under 0.005 s or MB would read as 0.00


class _Pass:
    """What the rankings read of each test, in one pass over the suite (a pass per figure cost
    a suite of millisecond tests ~20 k instructions a test: docs/benchmarks-ms-suite.md). The
    rankings of rare entries (leaks, held and retained memory, GPU, failed gates, repeats) then
    read only the tests that have one."""

    def __init__(self, tests: list[TestProfile]) -> None:
        self.peaks: list[float] = []  # each test's peak_of, in the suite's order
        self.by_cpu: list[tuple[float, TestProfile]] = []  # MIN_SHOWN or more, in that order
        self.by_peak: list[tuple[float, TestProfile]] = []
        self.with_lines: list[TestProfile] = []
        self.flagged: list[TestProfile] = []  # a verdict, or one of the rare entries
        self.short = 0  # tests in which no sample landed on profiled code
        for t in tests:
            peak = peak_of(t)
            self.peaks.append(peak)
            if peak >= MIN_SHOWN:
                self.by_peak.append((peak, t))
            cpu = t.cpu_s
            if cpu >= MIN_SHOWN:
                self.by_cpu.append((cpu, t))
            if t.lines:
                self.with_lines.append(t)
                if not any(s.samples for s in t.lines.values()):
                    self.short += 1
            else:
                self.short += 1
            if t.verdicts or (t.extra and _has_rare_entry(t.extra)):
                self.flagged.append(t)


# The entries the rare rankings read (_top_tests' GPU, _leaks, _not_repeatable; _failed_gates
# reads the verdicts): a test with none of them, or only empty ones (memory profiling writes
# empty leak entries into every test), is read by none of those rankings.
_RARE_ENTRIES = (
    extra_keys.LEAKS,
    extra_keys.HELD,
    extra_keys.RETAINED,
    extra_keys.GPU_PEAK_MB,
    extra_keys.NOT_REPEATABLE,
)


def _has_rare_entry(extra: dict[str, Any]) -> bool:
    for key in _RARE_ENTRIES:  # noqa: SIM110 (any() makes a generator, once a test)
        if extra.get(key):
            return True
    return False


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
            entry.peak_mb = max(entry.peak_mb, num(stats.extra.get(extra_keys.PEAK_MB)))
            entry.alloc_mb += num(stats.extra.get(extra_keys.ALLOC_MB))
            entry.test_ids.add(profile.nodeid)
    return list(found.values())


def _ranked(title: str, rows: list[str]) -> list[str]:
    return [title, *rows] if rows else []


def _test_row(figure: str, nodeid: str, width: int) -> str:
    """`figure` then the test id, cut in its middle so that the figure keeps its row."""
    prefix = f"{INDENT}{figure}   "
    return prefix + shorten_id(nodeid, width - display_width(prefix))


def _top(figures: list[tuple[float, TestProfile]]) -> list[tuple[float, TestProfile]]:
    """The TOP largest figures of MIN_SHOWN or more, largest first (ties: the suite's order)."""
    shown = [(figure, t) for figure, t in figures if figure >= MIN_SHOWN]
    return sorted(shown, key=lambda ft: -ft[0])[:TOP]


def _top_tests(suite: _Pass, width: int) -> list[str]:
    out = _ranked(
        "Top tests by CPU:",
        [_test_row(f"{format_seconds(cpu):>10}", t.nodeid, width) for cpu, t in _top(suite.by_cpu)],
    )
    out += _ranked(
        "Top tests by peak memory:",
        [_test_row(f"{peak:7.1f} MB", t.nodeid, width) for peak, t in _top(suite.by_peak)],
    )
    gpu = [
        (num(t.extra[extra_keys.GPU_PEAK_MB]), t)
        for t in suite.flagged
        if extra_keys.GPU_PEAK_MB in t.extra
    ]
    out += _ranked(
        "Top tests by GPU memory:",
        [_test_row(f"{peak:7.0f} MB", t.nodeid, width) for peak, t in _top(gpu)],
    )
    return out


def _line_row(entry: _SuiteLine, figure: str, rootdir: str, width: int) -> str:
    """`figure`, the line (its path cut in the middle: the line number stays), then as much of
    its source text as fits."""
    prefix = f"{INDENT}{figure}   "
    at = f":{entry.line}" + (f" ({entry.tests} tests)" if entry.tests > 1 else "")
    source = _source_text(rootdir, entry.file, entry.line)
    room = width - display_width(prefix + at)  # for the path, and the source text after it
    path_room = max(min(len(entry.file), MIN_PATH), room - 2 - display_width(source))
    where = shorten(entry.file, min(room, path_room)) + at
    return (prefix + where + "  " + fit(source, width - display_width(prefix + where) - 2)).rstrip()


def _top_lines(tests: list[TestProfile], total_cpu: float, rootdir: str, width: int) -> list[str]:
    """`tests`: those with lines; `total_cpu`: the suite's CPU time, above 0."""
    lines = _suite_lines(tests)

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
    return (source_text(rootdir, file, line) or "").strip()


def _leaks(tests: list[TestProfile], rootdir: str, width: int) -> list[str]:
    """Each likely leak and held suspect with its test and line; lines retaining memory across
    the session's tests (a leak too thin to score in any one test)."""
    out: list[str] = []
    for title, key, entries, describe in (
        (
            "Likely leaks (grew again when the test ran again):",
            extra_keys.LEAKS,
            likely_leaks,
            describe_leak,
        ),
        ("Held, not confirmed as leaks:", extra_keys.HELD, held, describe_held),
    ):
        found = [(t.nodeid, e) for t in tests if t.extra.get(key) for e in entries(t.extra)]
        rows: list[str] = []
        for nodeid, entry in found[:MAX_LISTED]:
            rows.append(INDENT + shorten_id(nodeid, width - len(INDENT)))
            rows += wrap(describe(entry), width, INDENT * 2, INDENT * 4)
        if len(found) > MAX_LISTED:
            more = len(found) - MAX_LISTED
            rows.append(f"{INDENT}and {more} more (--profile-json lists them all)")
        out += _ranked(title, rows)
    retained = [
        _retained_row(row, rootdir, width)
        for row in retained_lines(t.extra for t in tests if t.extra.get(extra_keys.RETAINED))
    ]
    return out + _ranked(
        f"Memory retained across tests (>= {SESSION_RETAINED_MB:g} MB at one line,"
        f" {SESSION_MIN_TESTS}+ tests):",
        retained,
    )


def _retained_row(row: SessionLine, rootdir: str, width: int) -> str:
    """The retained MB, the line (its path cut in the middle to fit), then its source text."""
    text = INDENT + describe_retained(row)
    over = display_width(text) - width
    if over > 0:
        text = INDENT + describe_retained(
            replace(row, file=shorten(row.file, len(row.file) - over))
        )
    source = _source_text(rootdir, row.file, row.line)
    return (text + "  " + fit(source, width - display_width(text) - 2)).rstrip()


def _failed_gates(tests: list[TestProfile], width: int) -> list[str]:
    out: list[str] = []
    for profile in tests:
        for verdict in profile.verdicts:
            if verdict.failed:
                label = "regressed" if verdict.kind == REGRESSION else "budget FAIL"
                out.append(INDENT + shorten_id(profile.nodeid, width - len(INDENT)))
                out += wrap(f"{label}: {verdict_text(verdict)}", width, INDENT * 2, INDENT * 3)
    return _ranked("Failed gates:", out)


def _not_repeatable(tests: list[TestProfile], width: int) -> list[str]:
    found = [
        (t.nodeid, str(t.extra[extra_keys.NOT_REPEATABLE]))
        for t in tests
        if extra_keys.NOT_REPEATABLE in t.extra
    ]
    if not found:
        return []
    rows: list[str] = []
    for nodeid, note in found[:MAX_LISTED]:
        nodeid = shorten_id(nodeid, width - len(INDENT) - 2)
        rows += wrap(f"{nodeid}: {note}", width, INDENT, INDENT * 3)
    if len(found) > MAX_LISTED:
        rows.append(f"{INDENT}and {len(found) - MAX_LISTED} more (--profile-json lists them all)")
    title = f"{len(found)} test(s) not repeatable (their outcome is their first run's):"
    return _ranked(title, rows)


def wants_details(config: Any) -> bool:
    """The per test report (-v) instead of the suite's summary."""
    return config.get_verbosity() > 0


def render_summary(session: SessionProfile, rootdir: str, width: int = WIDTH) -> str:
    tests = list(session.tests.values())
    suite = _Pass(tests)
    totals = session_totals(tests, suite.peaks)
    blocks = [session_line(totals, width)]
    short = suite.short
    if short:
        blocks.append(
            wrap(
                [
                    f"{short} of {len(tests)} tests ran under one sampling interval"
                    f" ({session.interval_s:g} s):",
                    "too short to measure (no sample landed in them).",
                ],
                width,
                "",
                INDENT,
            )
        )
    blocks += [
        _top_tests(suite, width),
        _top_lines(suite.with_lines, totals.cpu_s or 1.0, rootdir, width),
        _leaks(suite.flagged, rootdir, width),
        _failed_gates(suite.flagged, width),
        _not_repeatable(suite.flagged, width),
    ]
    tail = wrap(
        [
            "Per test details: -v;",
            "all figures: --profile-json, --profile-html.",
        ],
        width,
        "",
        INDENT,
    )
    for note in session.notes:
        tail += wrap(note, width, "note: ", INDENT * 3)
    blocks.append(tail)
    return "\n\n".join("\n".join(b) for b in blocks if b)


def unjudged_lines(
    unjudged: Sequence[Mapping[str, Any]],
    status: int | None,
    allowed: bool,
    allow_option: str,
    width: int | None = None,
) -> list[str]:
    """The last lines of the output when gates could not judge passing tests: `unjudged` counts
    them per gate (SessionProfile.unjudged's entries); `status`: the exit status set for them
    (None: not set); `allowed`: the user let such runs pass with `allow_option`. With `width`,
    each is wrapped between its phrases."""
    if not unjudged:
        return []
    counts = [f"{entry['tests']} by {entry['gate']}," for entry in unjudged]
    counts[-1] = counts[-1].removesuffix(",")
    total = sum(entry["tests"] for entry in unjudged)
    head = [f"{total} passing test(s) not judged:", *counts]
    ini_key = allow_option.removeprefix("--").replace("-", "_")
    if status is not None:
        lines = [
            head,
            [
                f"the run fails with exit status {status};",
                "the notes above say why.",
                "To let such a run pass:",
                f"{allow_option} (ini: {ini_key} = true)",
            ],
        ]
    else:
        lines = [[*head, f"(not a failure: {allow_option} is set)"] if allowed else head]
    if width is None:
        return [" ".join(phrases) for phrases in lines]
    return [row for phrases in lines for row in wrap(phrases, width, "", INDENT)]
