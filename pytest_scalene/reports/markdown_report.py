"""`--profile-markdown=PATH`: a Markdown summary for a CI step summary or a pull request's
comment. First the regressions, each with its lines before and after (markdown_regressions.py),
then the other gate failures; pytest's failures, what was reported but not failed and the top
lines of the tests that matter most are collapsed in <details>. The whole stays under MAX_CHARS
at any size of suite: the collapsed parts give way first, then the regressions' tables (the
least regressed first), and nothing is left out without a line saying how much."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..config.options import EXIT_UNJUDGED
from ..core import extra_keys
from ..core.model import SessionProfile, TestProfile
from ..core.verdict import REGRESSION, Verdict
from ..gates.metrics import METRICS
from .figures import verdict_kind
from .markdown_regressions import Regression, amount, cell, code, regressions, source

TOP_LINES = 5
MAX_TESTS = 20  # tests given a top-lines table: those with failures or notes first, then by CPU
# GitHub refuses a comment over 65,536 characters; the rest is room for what a CI job adds
# around the file (a heading, a link to the run).
MAX_CHARS = 60_000
NAMED = 3  # tests named for a note that many tests share
LEFT_OUT = "the JSON profile (--profile-json) and the HTML report have them all"
# pytest's outcome words, in the order of its final line
OUTCOME_KEYS = ("failed", "passed", "skipped", "deselected", "xfailed", "xpassed", "error")


@dataclass
class RunOutcomes:
    """What pytest's final line says, every failure, and whether the run stopped early: the
    summary must not read "all gates passed" over a red or interrupted run."""

    counts: dict[str, int] = field(default_factory=dict)
    failures: list[tuple[str, str, str]] = field(default_factory=list)  # nodeid, phase, message
    interrupted: str | None = None
    exit_status: int = 0

    @classmethod
    def of(cls, session: Any) -> RunOutcomes:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        stats = getattr(reporter, "stats", None) or {}
        counts = {k: len(stats[k]) for k in OUTCOME_KEYS if stats.get(k)}
        failures = [
            (str(r.nodeid), str(getattr(r, "when", None) or "collect"), _first_line(r))
            for key in ("failed", "error")
            for r in stats.get(key, [])
            if hasattr(r, "nodeid")
        ]
        interrupted = None
        if int(getattr(session, "exitstatus", 0) or 0) == 2:  # ExitCode.INTERRUPTED
            interrupted = "The run was interrupted"
        elif getattr(session, "shouldstop", False) or getattr(session, "shouldfail", False):
            interrupted = f"The run stopped early: {session.shouldstop or session.shouldfail}"
        return cls(counts, failures, interrupted, int(getattr(session, "exitstatus", 0) or 0))


def _first_line(report: Any) -> str:
    crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
    text = str(getattr(crash, "message", None) or getattr(report, "longrepr", "") or "")
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first if len(first) <= 120 else first[:119] + "…"


def _outcome_lines(outcomes: RunOutcomes) -> list[str]:
    out: list[str] = []
    if outcomes.interrupted:
        out += [f"**{outcomes.interrupted}**: these figures cover only the tests that ran.", ""]
    if outcomes.counts:
        out += ["Tests: " + ", ".join(f"{n} {k}" for k, n in outcomes.counts.items()) + ".", ""]
    return out


def _unjudged_lines(unjudged: list[dict[str, Any]], exit_status: int) -> list[str]:
    """The passing tests gates could not judge, as the terminal's last lines count them: a
    summary must not read "all gates passed" alone over a run that exits for them."""
    if not unjudged:
        return []
    total = sum(entry["tests"] for entry in unjudged)
    counts = "; ".join(f"{entry['tests']} by {cell(entry['gate'])}" for entry in unjudged)
    fails = (
        f" The run fails for them (exit status {EXIT_UNJUDGED})."
        if exit_status == EXIT_UNJUDGED
        else ""
    )
    return ["", f"**{total} passing test(s) not judged**: {counts}.{fails}"]


def _expected(verdict: Verdict) -> str:
    metric = verdict.metric
    if verdict.kind == REGRESSION:
        return f"baseline {amount(metric, verdict.baseline)}"
    limit = verdict.limit
    if isinstance(limit, bool):
        return f"{metric}={limit}"
    known = METRICS.get(str(metric))
    if known and isinstance(limit, (int, float)):
        return known.format_limit(limit)
    return amount(metric, limit)


FAILURES_HEAD = [
    "| test | gate | metric | limit / baseline | measured | line |",
    "| --- | --- | --- | --- | --- | --- |",
]


def _failure_row(profile: TestProfile, v: Verdict) -> str:
    cells = (
        code(profile.nodeid),
        verdict_kind(v),
        v.metric,
        _expected(v),
        amount(v.metric, v.value) or "not measured",
        _where(profile, v),
    )
    return "| " + " | ".join(cell(x) for x in cells) + " |"


def _where(profile: TestProfile, verdict: Verdict) -> str:
    """The line cell: the verdict's line; for leaks the likeliest leak's; else the test."""
    if verdict.line:
        return code(verdict.line)
    leaks = [x for x in profile.extra.get(extra_keys.LEAKS) or [] if isinstance(x, dict)]
    if verdict.metric == "leaks" and leaks:
        worst = max(leaks, key=lambda x: x.get("probability") or 0)
        return code(f"{worst.get('file')}:{worst.get('line')}")
    return "(the whole test)"


def _top_lines(profile: TestProfile, rootdir: str) -> list[str]:
    memory = extra_keys.PEAK_MB in profile.extra
    total = profile.cpu_s or 1.0
    header = f"#### {code(profile.nodeid)} ({profile.outcome}, CPU {profile.cpu_s:.2f} s"
    header += f", peak {profile.extra[extra_keys.PEAK_MB]:.1f} MB)" if memory else ")"
    ranked = sorted(
        profile.lines.items(),
        key=lambda kv: (kv[1].cpu_s, kv[1].extra.get(extra_keys.PEAK_MB, 0.0)),
        reverse=True,
    )[:TOP_LINES]
    if not ranked:
        return [header, "", "No line in profiled code was sampled.", ""]
    rows = [
        header,
        "",
        "| line | CPU s | CPU % |" + (" peak MB |" if memory else "") + " source |",
        "| --- | ---: | ---: |" + (" ---: |" if memory else "") + " --- |",
    ]
    for key, stats in ranked:
        peak = f" {stats.extra.get(extra_keys.PEAK_MB, 0.0):.1f} |" if memory else ""
        rows.append(
            f"| {code(f'{key.file}:{key.line}')} {cell(key.function)} | {stats.cpu_s:.3f} | "
            f"{100 * stats.cpu_s / total:.0f} |{peak} "
            f"{cell(code(source(rootdir, key.file, key.line)))} |"
        )
    return [*rows, ""]


def baseline_notes(profile: TestProfile) -> list[str]:
    baseline = profile.extra.get(extra_keys.BASELINE)
    notes = baseline.get("notes", []) if isinstance(baseline, dict) else []
    return [str(n) for n in notes] if isinstance(notes, list) else []


def _grouped(notes: list[tuple[TestProfile, str]]) -> list[list[str]]:
    """One entry per note, naming its tests: the same note of 300 tests is said once."""
    by_text: dict[str, list[str]] = {}
    for profile, note in notes:
        by_text.setdefault(note, []).append(profile.nodeid)
    entries = []
    for note, ids in by_text.items():
        if len(ids) == 1:
            entries.append([f"- {code(ids[0])}: {cell(note)}"])
            continue
        named = ", ".join(code(i) for i in ids[:NAMED])
        more = f" and {len(ids) - NAMED} more" if len(ids) > NAMED else ""
        entries.append([f"- {len(ids)} tests ({named}{more}): {cell(note)}"])
    return entries


@dataclass
class _Part:
    """A part of the summary: a title, the lines that open it, and its entries (a row, or a
    block of lines), which give way from the end when the summary is too long."""

    title: str
    head: list[str]
    entries: list[list[str]]
    collapsed: bool = True
    kept: int = 0  # entries that fit: set by _fit

    def lines(self) -> list[str]:
        if not self.entries:
            return []
        body = [*self.head, *(line for e in self.entries[: self.kept] for line in e)]
        left = len(self.entries) - self.kept
        if left:
            body += ["", f"_{left} more left out to keep this summary under GitHub's comment"
                     f" size: {LEFT_OUT}._"]  # fmt: skip
        if not self.collapsed:
            return [f"### {self.title}", "", *body, ""]
        # GitHub renders Markdown inside <details> only after a blank line.
        return [f"<details><summary>{self.title}</summary>", "", *body, "", "</details>", ""]


def _size(lines: list[str]) -> int:
    return sum(len(line) + 1 for line in lines)


def _fit(parts: list[_Part], room: int) -> None:
    """Keep what fits `room` characters: all of every part if it fits, else every part's frame
    (its title, head and left-out note) and a share of the rest each, the smallest part first,
    so that what it does not use goes to the next."""
    for part in parts:
        part.kept = len(part.entries)
    if sum(_size(p.lines()) for p in parts) <= room:
        return  # all of it, with no left-out note
    for part in parts:
        part.kept = 0
    room -= sum(_size(p.lines()) for p in parts)
    by_size = sorted(parts, key=lambda p: sum(_size(e) for e in p.entries))
    for index, part in enumerate(by_size):
        share = room // (len(by_size) - index)
        for entry in part.entries:
            if _size(entry) > share:
                break
            part.kept += 1
            share -= _size(entry)
            room -= _size(entry)


def _regression_part(found: list[Regression], room: int) -> _Part:
    """The regressions in full while they fit `room`, the others (the least regressed) in one
    line each; only if those do not fit either are the last left out, counted, and the worst
    keep their tables in half of the room."""
    blocks, short = [r.block for r in found], [[r.short] for r in found]
    frame = _size(_Part("Regressions", [], [[""]], collapsed=False).lines())
    total = frame + sum(_size(b) for b in blocks)
    full = len(found)
    while full and total > room:  # the least regressed give up their tables first
        full -= 1
        total += _size(short[full]) - _size(blocks[full])
    if total > room:  # too many even in one line each: the worst keep half the room in full
        used = frame
        while full < len(found) and used + _size(blocks[full]) <= room // 2:
            used += _size(blocks[full])
            full += 1
    part = _Part("Regressions", [], blocks[:full] + short[full:], collapsed=False)
    _fit([part], room)
    return part


def render(session: SessionProfile, rootdir: str, outcomes: RunOutcomes | None = None) -> str:
    tests = list(session.tests.values())
    outcomes = outcomes or RunOutcomes()
    checked = [(p, v) for p in tests for v in p.verdicts]
    failed = [(p, v) for p, v in checked if v.failed]
    kinds = sorted({verdict_kind(v) for _, v in failed})
    counts = ", ".join(f"{k}: {sum(verdict_kind(v) == k for _, v in failed)}" for k in kinds)
    failing_tests = len({p.nodeid for p, _ in failed})
    out = ["## pytest-scalene", "", *_outcome_lines(outcomes)]
    if failed:
        out.append(
            f"**{len(failed)} of {len(checked)} gates failed** in {failing_tests} of "
            f"{len(tests)} profiled tests ({counts})."
        )
    else:
        out.append(f"All {len(checked)} gates passed in {len(tests)} profiled tests.")
    out += _unjudged_lines(session.unjudged, outcomes.exit_status)
    out.append("")
    notes = [f"_note: {cell(n)}_" for n in session.notes]
    room = MAX_CHARS - _size(out) - _size(notes)

    # Not repeatable first, each (a test's outcome is its first run's); then the comparisons'
    # notes, each said once for all the tests that share it.
    repeats = [
        (p, str(p.extra[extra_keys.NOT_REPEATABLE]))
        for p in tests
        if extra_keys.NOT_REPEATABLE in p.extra
    ]
    reported = [(p, n) for p in tests for n in baseline_notes(p)]
    flagged = {p.nodeid for p, _ in failed + repeats + reported}
    sampled = [p for p in tests if p.lines]  # an A/B run measures in workers: no lines here
    chosen = sorted(sampled, key=lambda p: (p.nodeid not in flagged, -p.cpu_s))[:MAX_TESTS]
    failures = outcomes.failures  # the gates' own too: every failure, in pytest's words
    collapsed = [
        _Part(
            f"Test failures: {len(failures)}",
            ["| test | phase | message |", "| --- | --- | --- |"],
            [[f"| {code(n)} | {w} | {cell(m)} |"] for n, w, m in failures],
        ),
        _Part(
            f"Reported, not failed: {len(repeats) + len(reported)}",
            [],
            [[f"- {code(p.nodeid)}: {cell(n)}"] for p, n in repeats] + _grouped(reported),
        ),
        _Part(
            f"Top lines of {len(chosen)} test(s), at most {TOP_LINES} each",
            [],
            [_top_lines(p, rootdir) for p in chosen],
        ),
    ]
    room -= sum(_size(p.lines()) for p in collapsed)  # their frames, each saying all left out
    others = _Part(
        "Other gate failures",
        FAILURES_HEAD,
        [[_failure_row(p, v)] for p, v in failed if v.kind != REGRESSION],
        collapsed=False,
    )
    _fit([others], room)
    # The regressions first; the other failures keep a quarter of the room at least.
    regressed = _regression_part(
        regressions(tests, rootdir), room - min(_size(others.lines()), room // 4)
    )
    _fit([others], room - _size(regressed.lines()))
    room -= _size(regressed.lines()) + _size(others.lines())
    _fit(collapsed, room + sum(_size(p.lines()) for p in collapsed))
    for part in (regressed, others, *collapsed):
        out += part.lines()
    out += notes
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).rstrip() + "\n"
