"""What a comparison must not judge, with a note saying why: instruction counts from another
environment, and per-call figures against whole-test ones."""

from __future__ import annotations

from ..core.model import PER_CALL_EXTRA, comparable_environment
from .baseline_store import TestEntry
from .findings import Finding


def incomparable(baseline: TestEntry, current: TestEntry, findings: list[Finding]) -> set[str]:
    """The metrics not to judge; a note for each reason joins `findings`."""
    return _counts(baseline, current, findings) | _calls(baseline, current, findings)


def _counts(baseline: TestEntry, current: TestEntry, findings: list[Finding]) -> set[str]:
    """Instruction counts from another interpreter, valgrind, hash seed or package versions are
    not comparable: a note names what differs, never a failure. Counts from a checkout
    elsewhere are compared (comparison.py names the move in a regression's message)."""
    if "instructions" not in baseline.metrics or "instructions" not in current.metrics:
        return set()
    before = comparable_environment(baseline.environment)
    after = comparable_environment(current.environment)
    differs = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    if not differs:
        return set()
    shown = "; ".join(f"{k}: {before.get(k, '-')!r} -> {after.get(k, '-')!r}" for k in differs[:3])
    more = f" and {len(differs) - 3} more" if len(differs) > 3 else ""
    message = (
        f"instructions not compared: counted in another environment ({shown}{more}); re-save "
        "the baseline in this one"
    )
    findings.append(Finding("not_compared", "instructions", None, None, message))
    return {"instructions"}


def _calls(baseline: TestEntry, current: TestEntry, findings: list[Finding]) -> set[str]:
    """A benchmark test's figures are per call of the benchmarked function (benchmark/calls.py);
    a baseline of the whole test (saved before it called the fixture, or without pytest-scalene
    counting it) is another quantity."""
    now, then = current.cpu.get("calls", 0.0) >= 1, baseline.cpu.get("calls", 0.0) >= 1
    if now == then:
        return set()
    sides = ("per call of the benchmarked function", "for the whole test")
    message = (
        f"CPU time, memory allocated and copy volume not compared: this run measured them "
        f"{sides[0] if now else sides[1]}, the baseline {sides[1] if now else sides[0]}; "
        "re-save the baseline"
    )
    findings.append(Finding("not_compared", "cpu_s", None, None, message))
    return {"cpu_s", *PER_CALL_EXTRA}
