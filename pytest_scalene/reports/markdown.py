"""`--profile-markdown=PATH`: a short Markdown summary for a CI step summary or a PR comment:
gate failures (budgets and regressions) in a table, what was reported but not failed, and the
top lines of the tests that matter most."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core.model import SessionProfile, TestProfile
from ..core.natural_values import is_number
from ..core.source import source_line
from ..core.verdict import REGRESSION, Verdict
from ..gates.metrics import METRICS

TOP_LINES = 5
MAX_TESTS = 20  # tests given a top-lines table: those with failures or notes first, then by CPU
# pytest's outcome words, in the order of its final line
OUTCOME_KEYS = ("failed", "passed", "skipped", "deselected", "xfailed", "xpassed", "error")


@dataclass
class RunOutcomes:
    """What pytest's final line says, every failure, and whether the run stopped early: the
    summary must not read "all gates passed" over a red or interrupted run."""

    counts: dict[str, int] = field(default_factory=dict)
    failures: list[tuple[str, str, str]] = field(default_factory=list)  # nodeid, phase, message
    interrupted: str | None = None

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
        return cls(counts, failures, interrupted)


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
    if outcomes.failures:
        out += ["### Test failures", "", "| test | phase | message |", "| --- | --- | --- |"]
        out += [f"| {_code(n)} | {w} | {_cell(m)} |" for n, w, m in outcomes.failures]
        out.append("")
    return out


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _code(text: object) -> str:
    return "`" + str(text).replace("`", "'") + "`" if str(text) else ""


def _amount(metric: str | None, value: Any) -> str:
    if value is None or not is_number(value):
        return "" if value is None else str(value)
    known = METRICS.get(metric or "")
    return known.format(value) if known else f"{value:g}"


def _expected(verdict: Verdict) -> str:
    metric = verdict.metric
    if verdict.kind == REGRESSION:
        return f"baseline {_amount(metric, verdict.baseline)}"
    limit = verdict.limit
    if isinstance(limit, bool):
        return f"{metric}={limit}"
    known = METRICS.get(str(metric))
    if known and isinstance(limit, (int, float)):
        return known.format_limit(limit)
    return _amount(metric, limit)


def _failures_table(session: SessionProfile) -> list[str]:
    rows = [
        "| test | gate | metric | limit / baseline | measured | line |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for nodeid, profile in session.tests.items():
        for v in profile.verdicts:
            if v.failed:
                rows.append(
                    "| "
                    + " | ".join(
                        _cell(x)
                        for x in (
                            _code(nodeid),
                            v.kind,
                            v.metric,
                            _expected(v),
                            _amount(v.metric, v.value) or "not measured",
                            _where(profile, v),
                        )
                    )
                    + " |"
                )
    return rows


def _where(profile: TestProfile, verdict: Verdict) -> str:
    """The line cell: the verdict's line; for leaks the likeliest leak's; else the test."""
    if verdict.line:
        return _code(verdict.line)
    leaks = [x for x in profile.extra.get("leaks") or [] if isinstance(x, dict)]
    if verdict.metric == "leaks" and leaks:
        worst = max(leaks, key=lambda x: x.get("probability") or 0)
        return _code(f"{worst.get('file')}:{worst.get('line')}")
    return "(the whole test)"


def _source(rootdir: str, file: str, line: int) -> str:
    text = source_line(rootdir, file, line).strip()
    return text if len(text) <= 60 else text[:59] + "…"


def _top_lines(profile: TestProfile, rootdir: str) -> list[str]:
    memory = "peak_mb" in profile.extra
    total = profile.cpu_s or 1.0
    header = f"#### {_code(profile.nodeid)} ({profile.outcome}, CPU {profile.cpu_s:.2f} s"
    header += f", peak {profile.extra['peak_mb']:.1f} MB)" if memory else ")"
    ranked = sorted(
        profile.lines.items(),
        key=lambda kv: (kv[1].cpu_s, kv[1].extra.get("peak_mb", 0.0)),
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
        peak = f" {stats.extra.get('peak_mb', 0.0):.1f} |" if memory else ""
        rows.append(
            f"| {_code(f'{key.file}:{key.line}')} {_cell(key.function)} | {stats.cpu_s:.3f} | "
            f"{100 * stats.cpu_s / total:.0f} |{peak} "
            f"{_cell(_code(_source(rootdir, key.file, key.line)))} |"
        )
    return [*rows, ""]


def baseline_notes(profile: TestProfile) -> list[str]:
    baseline = profile.extra.get("baseline")
    notes = baseline.get("notes", []) if isinstance(baseline, dict) else []
    return [str(n) for n in notes] if isinstance(notes, list) else []


def render(session: SessionProfile, rootdir: str, outcomes: RunOutcomes | None = None) -> str:
    tests = list(session.tests.values())
    checked = [(p, v) for p in tests for v in p.verdicts]
    failed = [(p, v) for p, v in checked if v.failed]
    kinds = sorted({v.kind for _, v in failed})
    counts = ", ".join(f"{k}: {sum(v.kind == k for _, v in failed)}" for k in kinds)
    failing_tests = len({p.nodeid for p, _ in failed})
    out = ["## pytest-scalene", "", *_outcome_lines(outcomes or RunOutcomes())]
    if failed:
        out.append(
            f"**{len(failed)} of {len(checked)} gates failed** in {failing_tests} of "
            f"{len(tests)} profiled tests ({counts})."
        )
        out += ["", "### Gate failures", "", *_failures_table(session)]
    else:
        out.append(f"All {len(checked)} gates passed in {len(tests)} profiled tests.")
    notes = [(p, n) for p in tests for n in baseline_notes(p)]
    notes += [(p, str(p.extra["not_repeatable"])) for p in tests if "not_repeatable" in p.extra]
    if notes:
        out += ["", "### Reported, not failed", ""]
        out += [f"- {_code(p.nodeid)}: {_cell(n)}" for p, n in notes]
    flagged = {p.nodeid for p, _ in failed + notes}
    chosen = sorted(tests, key=lambda p: (p.nodeid not in flagged, -p.cpu_s))[:MAX_TESTS]
    if chosen:
        out += ["", f"### Top lines (at most {TOP_LINES} per test)", ""]
        for profile in chosen:
            out += _top_lines(profile, rootdir)
    out += [f"_note: {_cell(n)}_" for n in session.notes]
    return "\n".join(out).rstrip() + "\n"
