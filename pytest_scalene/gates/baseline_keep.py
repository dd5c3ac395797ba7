"""Re-saving unchanged code leaves the baseline files byte-identical: a test whose new figures
are within noise of the stored ones keeps its stored entry, and a module whose every test is kept
is not rewritten at all. So a baseline diff in git shows only what really changed, and two
branches that re-save rarely conflict.

"Within noise" is the noise rule both ways (docs/baselines.md), in the same counting environment
(instruction counts: interpreter, valgrind, packages): each figure of the test and of
each line differs from the stored one by at most the metric's absolute floor, or by at most its
tolerance in either direction. The lines must be the same (file, function, offset from the
function, text and line number), except lines whose every figure is under the floor, which a
sampling profiler may catch in one run and miss in the next.
"""

from __future__ import annotations

from ..core.model import comparable_environment
from .baseline_store import LineEntry, TestEntry
from .noise_rule import NoiseRule

LineId = tuple[str, str, int, str, int]


def _close(name: str, before: float, after: float, rule: NoiseRule) -> bool:
    if abs(after - before) <= rule.floor(name):
        return True
    tolerance = rule.tolerance_for(name)
    return after <= before * (1 + tolerance) and before <= after * (1 + tolerance)


def _metrics_close(before: dict[str, float], after: dict[str, float], rule: NoiseRule) -> bool:
    """A figure missing on one side counts as 0 (a line lists only its non-zero figures)."""
    return all(
        _close(n, before.get(n, 0.0), after.get(n, 0.0), rule) for n in before.keys() | after.keys()
    )


def _line_id(entry: LineEntry) -> LineId:
    return (entry.file, entry.function, entry.offset, entry.text, entry.line)


def _negligible(entry: LineEntry, rule: NoiseRule) -> bool:
    return all(v <= rule.floor(n) for n, v in entry.metrics.items())


def within_noise(stored: TestEntry, new: TestEntry, rule: NoiseRule) -> bool:
    """`new` measures the same code as `stored`, within the noise rule: keep `stored`."""
    if stored.metrics.keys() != new.metrics.keys():  # a profiler on in one run only
        return False
    # Counts from another environment (interpreter, valgrind, packages, a benchmark's counted
    # calls; not where the checkout lies, which a save from another clone must not churn) are
    # another quantity: the comparison would not judge them, and "re-save the
    # baseline" must replace them, however close the figures.
    if comparable_environment(stored.environment) != comparable_environment(new.environment):
        return False
    if not _metrics_close(stored.metrics, new.metrics, rule):
        return False
    before = {_line_id(e): e for e in stored.lines}
    after = {_line_id(e): e for e in new.lines}
    for key in before.keys() | after.keys():
        old, now = before.get(key), after.get(key)
        if old is None or now is None:
            if not _negligible(old or now, rule):  # type: ignore[arg-type]
                return False
        elif not _metrics_close(old.metrics, now.metrics, rule):
            return False
    return True
