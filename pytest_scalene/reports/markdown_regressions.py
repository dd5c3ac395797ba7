"""The regressions of the Markdown summary (markdown_report.py): per regressed test, what regressed
and a small table of its lines before and after, each with its function and source text. Before is
the baseline (--profile-compare), REF (--profile-compare-ref) or the recent runs' median
(--profile-compare-history); after is this run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core import extra_keys
from ..core.model import TestProfile
from ..core.natural_values import is_number
from ..core.source import source_line
from ..core.verdict import REGRESSION, Verdict
from ..gates.metrics import METRICS
from .stored_baselines import Baselines

MAX_SOURCE = 60  # characters of a line's source text in a table cell
MAX_SHORT = 300  # characters of a regression's message in its one-line form


def cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def code(text: object) -> str:
    return "`" + str(text).replace("`", "'") + "`" if str(text) else ""


def amount(metric: str | None, value: Any) -> str:
    if value is None or not is_number(value):
        return "" if value is None else str(value)
    known = METRICS.get(metric or "")
    return known.format(value) if known else f"{value:g}"


def source(rootdir: str, file: str, line: int) -> str:
    text = source_line(rootdir, file, line).strip()
    return text if len(text) <= MAX_SOURCE else text[: MAX_SOURCE - 1] + "…"


def _seconds(value: Any) -> str:
    """Three figures, for a before and after read side by side: 177 ms, 0.303 s would hide it."""
    if not is_number(value):
        return ""
    return f"{value:.2f} s" if value >= 1 else f"{1e3 * value:.3g} ms"


def _ratio(before: Any, after: Any) -> float | None:
    if is_number(before) and is_number(after) and before > 0:
        return float(after) / float(before)
    return None


def _change(before: Any, after: Any) -> str:
    ratio = _ratio(before, after)
    return "" if ratio is None else f"{ratio:.2f}x"


def _place(line: str) -> tuple[str, int, str] | None:
    """("file", line, "function") from a verdict's "file:line function"."""
    where, _, function = line.partition(" ")
    file, _, number = where.rpartition(":")
    return (file, int(number), function) if file and number.isdigit() else None


def _ab(profile: TestProfile) -> dict[str, Any] | None:
    found = profile.extra.get(extra_keys.AB)
    return found if isinstance(found, dict) and "verdict" in found else None


def is_ab(profile: TestProfile, verdict: Verdict) -> bool:
    """The test's A/B verdict: its figures are the A/B's medians per call."""
    ab = _ab(profile)
    return bool(
        ab
        and verdict.metric == "cpu_s"
        and verdict.baseline == ab.get("baseline_cpu_s")
        and verdict.value == ab.get("cpu_s")
    )


@dataclass
class Regression:
    """One regressed test: its full block and the one line that stands for it when the summary
    must be cut to size."""

    nodeid: str
    worst: float  # its largest after / before: the worst come first
    block: list[str]
    short: str


def _ab_rows(ab: dict[str, Any], rootdir: str) -> list[str]:
    """Per function that grew most (ab.lines) its pooled sampled self CPU time on each side,
    and each function the function rule failed that is not among them, with its ratio."""
    found = []
    for g in ab.get("lines") or []:
        before, after = g.get("baseline_cpu_s"), g.get("cpu_s")
        times = (_seconds(before), _seconds(after), _change(before, after))
        found.append((g, "CPU time", *times))
    named = {(g.get("file"), g.get("function")) for g in ab.get("lines") or []}
    for f in ab.get("functions") or []:
        if f.get("verdict") == "fail" and (f.get("file"), f.get("function")) not in named:
            ratio = f.get("self_ratio", f.get("ratio"))
            found.append(
                (f, "CPU time (self)", "", "", f"{ratio:.2f}x" if is_number(ratio) else "")
            )
    return [
        _row(
            str(e.get("file")),
            int(e.get("line") or 0),
            str(e.get("function") or ""),
            *rest,
            rootdir,
        )
        for e, *rest in found
    ]


def _row(
    file: str,
    line: int,
    function: str,
    metric: str,
    before: str,
    after: str,
    change: str,
    rootdir: str,
) -> str:
    where = code(f"{file}:{line}" if line else file)
    text = code(source(rootdir, file, line)) if line else ""
    return (
        f"| {where} | {code(function)} | {metric} | {before} | {after} | {change} | {cell(text)} |"
    )


def _line_figure(metric: str, value: Any) -> str:
    """A line's figure of `metric`: seconds to three figures, the others as messages say them."""
    known = METRICS.get(metric)
    if known is None or not is_number(value):
        return ""
    if known.unit == "s" and known.line_unit is None:
        return _seconds(value)
    return known.format_line(value)


def _line_rows(verdicts: list[Verdict], rootdir: str) -> list[str]:
    """The failed line verdicts of a comparison with a baseline, each line's figures."""
    rows = []
    for v in verdicts:
        place = _place(v.line or "")
        if place is not None:
            known = METRICS.get(v.metric)
            before, after = _line_figure(v.metric, v.baseline), _line_figure(v.metric, v.value)
            change = _change(v.baseline, v.value)
            label = known.label if known else v.metric
            rows.append(_row(*place, label, before, after, change, rootdir))
    return rows


def _baseline_rows(
    profile: TestProfile, totals: list[Verdict], lines: list[Verdict], baselines: Baselines
) -> list[str]:
    """For each test total that regressed against the stored baseline, the lines whose figure
    grew most, but those a line verdict already shows."""
    shown = {(v.line, v.metric) for v in lines}
    rows = []
    for g in baselines.grown(profile, [v.metric for v in totals]):
        if (f"{g.file}:{g.line} {g.function}", g.metric) in shown:
            continue
        known = METRICS.get(g.metric)
        before = "new" if g.before is None else _line_figure(g.metric, g.before)
        after, change = _line_figure(g.metric, g.after), _change(g.before, g.after)
        label = known.label if known else g.metric
        rows.append(
            _row(g.file, g.line, g.function, label, before, after, change, baselines.rootdir)
        )
    return rows


def regression(
    profile: TestProfile, rootdir: str, baselines: Baselines | None = None
) -> Regression | None:
    """The test's regression block, or None when no regression verdict of it failed.
    `baselines`: the run's baseline files, for the lines behind a test total."""
    failed = [v for v in profile.verdicts if v.kind == REGRESSION and v.failed]
    if not failed:
        return None
    ab = _ab(profile)
    ab_verdicts = [v for v in failed if is_ab(profile, v)]
    totals = [v for v in failed if v in ab_verdicts or not v.line]
    lines = [v for v in failed if v not in totals]
    block = [f"#### {code(profile.nodeid)}", ""]
    block += [f"- {cell(v.message)}" for v in totals or lines[:1]]
    before, caption = "baseline", ""
    rows = _line_rows(lines, rootdir)
    stored = [v for v in totals if v not in ab_verdicts]
    if (
        stored
        and baselines is not None
        and (grown := _baseline_rows(profile, stored, lines, baselines))
    ):
        rows += grown
        caption = (
            "_baseline and now: the lines whose figure grew most, paired with the baseline's as"
            " the comparison pairs them (new: a line the baseline does not have)._"
        )
    if ab is not None and ab_verdicts:
        before = f"{ab.get('ref')} {code(str(ab.get('commit', ''))[:8])}"
        rows = _ab_rows(ab, rootdir) + rows
        caption = (
            f"_{cell(ab.get('ref'))} and now: each function's sampled self CPU time over the"
            f" {ab.get('pairs')} runs of each side, at its line that grew most._"
        )
    if rows:
        block += [
            "",
            f"| line | function | metric | {before} | now | change | source |",
            "| --- | --- | --- | ---: | ---: | ---: | --- |",
            *rows,
        ]
        block += ["", caption] if caption else []
    worst = max((_ratio(v.baseline, v.value) or 0.0 for v in failed), default=0.0)
    first = (totals or lines)[0]
    message = first.message if len(first.message) <= MAX_SHORT else first.message[:299] + "…"
    short = f"- {code(profile.nodeid)}: {cell(message)}"
    return Regression(profile.nodeid, worst, [*block, ""], short)


def regressions(tests: list[TestProfile], rootdir: str) -> list[Regression]:
    """Every regressed test's block, the largest ratio first."""
    baselines = Baselines(rootdir)
    found = [r for r in (regression(t, rootdir, baselines) for t in tests) if r is not None]
    return sorted(found, key=lambda r: (-r.worst, r.nodeid))
