"""Regression verdicts: a run's test entry against its baseline entry, under the noise rule
(noise_rule.py). Each gate judges what is counted where there is such a figure (bytes, not bytes
per second); CPU is judged on CPU time, never wall time. A line is judged only when it carries at
least `line_share` of the test's total for that metric. New and vanished lines are reported,
never failed.
"""

from __future__ import annotations

from dataclasses import replace

from ..core.model import PATHS_KEY
from .baseline_store import LineEntry, TestEntry
from .findings import JUDGED, Comparison, Finding
from .incomparable import incomparable
from .line_matching import match_lines, where
from .metrics import COMPARED, METRICS
from .noise_rule import CPU_ERRORS, NoiseRule

CPU_TIMED = ("cpu_s",)  # compared metrics that move with the load on other cores
# Footprints, not costs: a line's peak is the footprint while it ran, which holds what earlier
# lines allocated, and which line a threshold sample lands on moves from run to run.
FOOTPRINTS = ("peak_mb", "gpu_peak_mb")
# A function's instructions are judged when their growth is at least this share of the test's.
FUNCTION_SHARE = 0.005


def compare(
    baseline: TestEntry, current: TestEntry, rule: NoiseRule, skip: tuple[str, ...] = ()
) -> Comparison:
    """Judge `current` against `baseline`; the findings name the metric, both values, the line.
    Metrics in `skip` are not judged (the CPU time, when instructions are counted)."""
    rule = rule.per_call(current.cpu.get("calls", 0.0), baseline.cpu.get("calls", 0.0))
    rule = rule.counted(baseline.environment, current.environment)
    pairs, by_offset, new, vanished = match_lines(baseline.lines, current.lines)
    result = Comparison(
        matched_by_text=len(pairs) - by_offset,
        matched_by_offset=by_offset,
        new_lines=len(new),
        vanished_lines=len(vanished),
    )
    skipped = incomparable(baseline, current, result.findings) | set(skip)
    for metric in COMPARED:
        name = metric.name
        if name in skipped:
            continue
        before, after = baseline.metrics.get(name), current.metrics.get(name)
        if before is None or after is None:
            if before is not None or after is not None:
                why = (
                    "the baseline has it but this run did not measure it"
                    if after is None
                    else _baseline_lacks(name, baseline)
                )
                message = f"{metric.label} not compared: {why}"
                result.findings.append(Finding("not_compared", name, before, after, message))
            continue
        judge = _Judge(name, rule)
        if name == "instructions":
            found = function_findings(baseline, current, judge)
            result.findings += [_counted_elsewhere(f, baseline, current) for f in found]
            continue
        result.findings += judge.test(baseline, current, pairs, new)
        result.findings += judge.lines(baseline, current, pairs, new, vanished)
    result.findings = [_with_limit(f, rule) for f in result.findings]
    return result


def _allocation_growth(
    pairs: list[tuple[LineEntry, LineEntry]], new: list[LineEntry]
) -> list[tuple[float, LineEntry | None, LineEntry]]:
    """The lines whose own net allocation grew: where a larger footprint came from."""
    grown = [(_alloc(c) - _alloc(b), b, c) for b, c in pairs] + [(_alloc(c), None, c) for c in new]
    return [g for g in grown if g[0] > 0]


def _alloc(entry: LineEntry | None) -> float:
    return 0.0 if entry is None else entry.metrics.get("alloc_mb", 0.0)


def _with_limit(finding: Finding, rule: NoiseRule) -> Finding:
    if finding.kind not in JUDGED or finding.baseline is None:
        return finding
    before = finding.baseline
    return replace(finding, limit=before + rule.least_growth(finding.metric, before))


def _counted_elsewhere(finding: Finding, baseline: TestEntry, current: TestEntry) -> Finding:
    """A count regression whose baseline was counted with the checkout or the interpreter
    elsewhere says so: code that resolves paths counts per directory (core/model.PATHS_KEY)."""
    before = baseline.environment.get(PATHS_KEY)
    after = current.environment.get(PATHS_KEY)
    if finding.kind != "regression" or before is None or before == after:
        return finding
    note = (
        f"; the baseline was counted with its paths elsewhere ({before} -> {after}): code that "
        "resolves a path counts per directory, so part of this may be the move; re-save the "
        "baseline where it is compared"
    )
    return replace(finding, message=finding.message + note)


def _no_function_named(finding: Finding, current: TestEntry, judge: _Judge) -> Finding:
    """A count regression that no function's count explains names no function and says why.
    Never a line picked from sampled CPU time instead: on a small workload it rests on a sample
    or two (it named an unrelated line in 13 of 30 failures of a real suite on 3.11)."""
    if finding.kind != "regression":
        return finding
    if current.functions:
        why = (
            "no profiled Python function's inclusive count grew by more than "
            f"+{judge.tolerance * 100:.0f}% and {FUNCTION_SHARE:.1%} of the test's"
        )
    elif "-X perf" in current.environment.get("callgrind_options", ""):  # the trampoline was on
        why = "no profiled Python function was counted"
    else:
        why = (
            "per-function counts need Python 3.12+ (its perf trampoline gives each Python "
            "function a callgrind entry; before it, all share the interpreter's C frames)"
        )
    return replace(finding, message=f"{finding.message}; no function named: {why}", line=None)


def function_findings(baseline: TestEntry, current: TestEntry, judge: _Judge) -> list[Finding]:
    """The test's instructions, and the function that grew: among the Python functions whose
    inclusive count (the function with all it calls, as timeit would time it) grew by more than
    the tolerance and by at least FUNCTION_SHARE of the test, those carrying at least half of
    the largest growth (a caller carries its callee's), the one that grew the most relatively
    (the callee, not its callers). A function's regression fails the test even when the test's
    total stays within the tolerance."""
    found = judge.test(baseline, current, [], [])
    test_before = judge.value(baseline)
    grown = []
    for name, after in current.functions.items():
        before = baseline.functions.get(name)
        if before is None or after - before < FUNCTION_SHARE * test_before:
            continue
        if judge.regressed(before, after):
            grown.append((after - before, after / before if before else float("inf"), name))
    if not grown:
        return [_no_function_named(f, current, judge) for f in found]
    largest = max(g[0] for g in grown)
    _delta, _ratio, name = max((g for g in grown if g[0] >= largest / 2), key=lambda g: g[1])
    before, after = baseline.functions[name], current.functions[name]
    place = current.function_lines.get(name) or name.replace("::", " ")
    # The next ones by relative growth: a callee whose growth is spent in library code called
    # by its caller (more records, then more json work) is named too.
    others = sorted((g for g in grown if g[2] != name), key=lambda g: -g[1])[:2]
    also = "".join(
        f"; also {current.function_lines.get(n) or n.replace('::', ' ')} inclusive "
        f"{(r - 1) * 100:+.0f}%"
        for _d, r, n in others
    )
    culprit = f"{place}: inclusive {judge.versus(before, after)}){also}"
    out = []
    for finding in found:
        if finding.kind == "regression":
            finding = Finding(
                "regression",
                finding.metric,
                finding.baseline,
                finding.value,
                f"{finding.message}; most growth in {culprit}",
                place,
            )
        out.append(finding)
    if not any(f.kind == "regression" for f in out):
        message = f"instructions regressed in {culprit} (allowed +{judge.tolerance * 100:.0f}%)"
        out.append(Finding("regression", "instructions", before, after, message, place))
    return out


def _baseline_lacks(name: str, baseline: TestEntry) -> str:
    if name == "copy_mb" and "copy_mb_s" in baseline.metrics:
        return (
            "the baseline predates counted copy volume (it holds the copy rate, MB/s, which is "
            "no longer compared): re-save the baseline to gate on the MB copied"
        )
    return "this run measured it but the baseline has none (re-save the baseline to gate on it)"


class _Judge:
    """One metric's verdicts, on the test total and on the lines that matter."""

    def __init__(self, name: str, rule: NoiseRule) -> None:
        self.name, self.metric = name, METRICS[name]
        self.rule = rule
        self.tolerance = rule.tolerance_for(name)
        self.floor = rule.floor(name)
        self.line_share = rule.line_share

    def value(self, entry: LineEntry | TestEntry | None) -> float:
        return 0.0 if entry is None else entry.metrics.get(self.name, 0.0)

    def regressed(self, before: float, after: float) -> bool:
        return self.rule.regressed(self.name, before, after)

    def absolute_limit(self, before: float) -> str:
        """The floor as the ok message shows it, with the sampling error where that is larger."""
        sampled = self.rule.sampling_growth(self.name, before)
        if sampled > self.floor:
            errors = f"{CPU_ERRORS:g} standard errors of its samples"
            return f" and +{self.metric.format(sampled)}, {errors}"
        return f" and +{self.metric.format(self.floor)}" if self.floor > 0 else ""

    def versus(self, before: float, after: float) -> str:
        fmt = self.metric.format
        change = f"{(after / before - 1) * 100:+.0f}%" if before > 0 else "from 0"
        return f"{fmt(after)} vs baseline {fmt(before)} ({change}"

    def test(
        self,
        baseline: TestEntry,
        current: TestEntry,
        pairs: list[tuple[LineEntry, LineEntry]],
        new: list[LineEntry],
    ) -> list[Finding]:
        label, fmt = self.metric.label, self.metric.format
        before, after = self.value(baseline), self.value(current)
        if not self.regressed(before, after):
            floor = self.absolute_limit(before)
            message = (
                f"{label} {self.versus(before, after)}; fails above "
                f"+{self.tolerance * 100:.0f}%{floor})"
            )
            found = [Finding("ok", self.name, before, after, message)]
            if self.regressed(after, before):  # as far below the baseline as a regression is above
                hint = (
                    "; if the code did not change, the baseline was recorded on a busier machine"
                    if self.name in CPU_TIMED
                    else ""
                )
                message = (
                    f"{label} improved: {self.versus(before, after)}); re-save the baseline to "
                    f"keep the gain{hint} (not failed)"
                )
                found.append(Finding("improved", self.name, before, after, message))
            return found
        message = (
            f"{label} regressed: {self.versus(before, after)}, "
            f"allowed +{self.tolerance * 100:.0f}%)"
        )
        grown = [(self.value(c) - self.value(b), b, c) for b, c in pairs]
        grown += [(self.value(c), None, c) for c in new]
        if self.name == "peak_mb":  # host memory: the lines whose allocation grew
            grown = _allocation_growth(pairs, new) or grown
        if grown:
            delta, b, c = max(grown, key=lambda g: g[0])
            if delta > 0:
                was = fmt(self.value(b)) if b is not None else "new line"
                message += f"; most growth at {where(c)}: {was} -> {fmt(self.value(c))}"
        return [Finding("regression", self.name, before, after, message)]

    def lines(
        self,
        baseline: TestEntry,
        current: TestEntry,
        pairs: list[tuple[LineEntry, LineEntry]],
        new: list[LineEntry],
        vanished: list[LineEntry],
    ) -> list[Finding]:
        label, fmt, share = self.metric.label, self.metric.format, self.line_share
        total, base_total = self.value(current), self.value(baseline)
        if self.name in FOOTPRINTS:
            return self._footprint_lines(base_total, pairs, new)
        findings = []
        for b, c in pairs:
            before, after = self.value(b), self.value(c)
            drawn = self.rule.line_regressed(self.name, before, after, (base_total, total))
            if after >= share * total and drawn:
                message = (
                    f"{label} regressed at {where(c)} `{c.text}`: {self.versus(before, after)}, "
                    f"allowed +{self.tolerance * 100:.0f}%)"
                )
                findings.append(Finding("regression", self.name, before, after, message, where(c)))
        for c in new:
            value = self.value(c)
            if value >= share * total and value > self.floor:
                message = (
                    f"new line {where(c)} `{c.text}`: {label} {fmt(value)} "
                    "(not in the baseline; not failed)"
                )
                findings.append(Finding("new_line", self.name, None, value, message, where(c)))
        for b in vanished:
            value = self.value(b)
            if value >= share * base_total and value > self.floor:
                message = (
                    f"vanished line {where(b)} `{b.text}` (baseline line number): {label} "
                    f"{fmt(value)} in the baseline, not seen now (not failed)"
                )
                findings.append(Finding("vanished_line", self.name, value, None, message, where(b)))
        return findings

    def _footprint_lines(
        self,
        base_total: float,
        pairs: list[tuple[LineEntry, LineEntry]],
        new: list[LineEntry],
    ) -> list[Finding]:
        """A line's footprint regressed when it went beyond the highest footprint of the whole
        baseline test, not merely beyond the same line's: an unchanged test whose 40 MB peak
        was sampled on the next line (`assert len(block) == ...`) in one run and not in the
        other is not a regression. Of the lines beyond it, those whose own allocation grew are
        named (the line after a larger allocation is beyond it too); if none, all of them."""
        label, fmt = self.metric.label, self.metric.format

        def reference(b: LineEntry | None) -> float:  # a line's peak is within its test's,
            return max(base_total, self.value(b))  # unless a file was merged or edited

        above = [  # `> base_total` first: most lines are within it (a hot path, benchmarks/)
            (b, c)
            for b, c in [*pairs, *((None, c) for c in new)]
            if self.value(c) > base_total and self.regressed(reference(b), self.value(c))
        ]
        grew = []
        if self.name == "peak_mb":  # host memory: each line's own allocation is known
            grew = [(b, c) for b, c in above if _alloc(c) - _alloc(b) > self.floor]
        findings = []
        for b, c in grew or above:
            before, after = reference(b), self.value(c)
            was = f"{fmt(self.value(b))} on this line" if b is not None else "a new line"
            change = f"{(after / before - 1) * 100:+.0f}%" if before > 0 else "from 0"
            message = (
                f"{label} regressed at {where(c)} `{c.text}`: {fmt(after)} vs baseline "
                f"{fmt(before)}, the test's peak ({was}; {change}, "
                f"allowed +{self.tolerance * 100:.0f}%)"
            )
            findings.append(Finding("regression", self.name, before, after, message, where(c)))
        return findings
