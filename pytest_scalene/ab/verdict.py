"""The A/B statistic: the median of per-pair CPU-time ratios (current / baseline), judged by a
sequential rule that stops early when the answer is clear, and the line that grew most in the
samples pooled over all runs of each side.

The constants come from measurements on the shared 2-core development VM (docs/baselines.md,
"A/B against a git ref"; benchmarks/verdicts.py --modes ab).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Stage:
    pairs: int  # judged once this many pairs are measured
    pass_below: float | None  # median ratio below which the test passes now
    fail_above: float  # median ratio above which it fails now


# 10 pairs: only clear cases are decided; 20: most; 40: the last word, at FAIL_ABOVE.
FAIL_ABOVE = 1.10
STAGES = (
    Stage(10, 1.04, 1.30),
    Stage(20, 1.06, 1.15),
    Stage(40, None, FAIL_ABOVE),
)
MAX_PAIRS = STAGES[-1].pairs


def median_ratio(ratios: Sequence[float]) -> float:
    return statistics.median(ratios)


def decide(ratios: Sequence[float], stages: Sequence[Stage] | None = None) -> str | None:
    """The verdict, "pass" or "fail", or None while more pairs are needed."""
    stages = STAGES if stages is None else stages
    n = len(ratios)
    for stage in stages:
        if n != stage.pairs:
            continue
        ratio = median_ratio(ratios)
        if ratio > stage.fail_above:
            return "fail"
        if stage.pass_below is None or ratio < stage.pass_below:
            return "pass"
    if n >= stages[-1].pairs:
        return "fail" if median_ratio(ratios) > stages[-1].fail_above else "pass"
    return None


def threshold_at(pairs: int, stages: Sequence[Stage] | None = None) -> float:
    """The median ratio above which a test measured over `pairs` pairs fails."""
    stages = STAGES if stages is None else stages
    return next((s.fail_above for s in stages if pairs <= s.pairs), stages[-1].fail_above)


@dataclass(frozen=True)
class LineGrowth:
    file: str
    function: str
    line: int
    baseline_cpu_s: float  # the function's sampled CPU time over all runs of the baseline side
    cpu_s: float  # and of the current side


def _by_line(lines: Sequence[Sequence[object]]) -> dict[tuple[str, str, int], float]:
    found: dict[tuple[str, str, int], float] = {}
    for file, function, line, cpu_s in lines:
        key = (str(file), str(function), int(line))  # type: ignore[call-overload]
        found[key] = found.get(key, 0.0) + float(cpu_s)  # type: ignore[arg-type]
    return found


def _by_function(lines: dict[tuple[str, str, int], float]) -> dict[tuple[str, str], float]:
    found: dict[tuple[str, str], float] = {}
    for (file, function, _), cpu_s in lines.items():
        found[(file, function)] = found.get((file, function), 0.0) + cpu_s
    return found


def most_growth(
    baseline: Sequence[Sequence[object]], current: Sequence[Sequence[object]], top: int = 2
) -> list[LineGrowth]:
    """The functions whose pooled sampled CPU time grew most from the baseline's runs to the
    current ones (at most `top`, largest growth first), each with its line that grew most.
    Line numbers may differ between the trees, so functions are matched by file and qualified
    name, and the current side's line is named. A slowed helper can come second to its caller
    when the caller's own lines (library calls on a bigger result) grew more."""
    before, after = _by_line(baseline), _by_line(current)
    funcs_before, funcs_after = _by_function(before), _by_function(after)
    growth = {k: v - funcs_before.get(k, 0.0) for k, v in funcs_after.items()}
    ranked = sorted((k for k in growth if growth[k] > 0), key=lambda k: (-growth[k], k))
    # The runner-up only when it grew by at least 5% of what the first grew.
    ranked = [k for k in ranked[:top] if growth[k] >= 0.05 * growth[ranked[0]]]
    found = []
    for file, function in ranked:
        mine = {k: v for k, v in after.items() if k[:2] == (file, function)}
        # The line that grew most against the same line number (the same numbers when the
        # function changed in place), then the one with the most time.
        key = max(mine, key=lambda k: (mine[k] - before.get(k, 0.0), mine[k]))
        found.append(
            LineGrowth(
                file,
                function,
                key[2],
                round(funcs_before.get((file, function), 0.0), 6),
                round(funcs_after[(file, function)], 6),
            )
        )
    return found
