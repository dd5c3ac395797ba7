"""The A/B statistic: the median of per-pair CPU-time ratios (current / baseline), judged by a
sequential rule that stops early when the answer is clear; per function, its CPU time per run
estimated from the samples pooled over all runs of each side, judged with its sampling error
(the function rule, below); and the line that grew most in those pooled samples.

The constants come from measurements on the shared 2-core development VM (docs/baselines.md,
"A/B against a git ref"; benchmarks/verdicts.py --modes ab).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .worker_sampler import function_of


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
    return [_growth(before, after, file, lambda q, f=function: q == f) for file, function in ranked]


def _growth(
    before: dict[tuple[str, str, int], float],
    after: dict[tuple[str, str, int], float],
    file: str,
    mine: Callable[[str], bool],
) -> LineGrowth:
    """The line of the function (the code objects `mine` accepts) that grew most against the
    same line number (the same numbers when the function changed in place), then the one with
    the most time; and the function's pooled sampled CPU time on each side."""
    lines = {k: v for k, v in after.items() if k[0] == file and mine(k[1])}
    key = max(lines, key=lambda k: (lines[k] - before.get(k, 0.0), lines[k]))
    was = sum(v for k, v in before.items() if k[0] == file and mine(k[1]))
    return LineGrowth(file, key[1], key[2], round(was, 6), round(sum(lines.values()), 6))


def line_of(
    baseline: Sequence[Sequence[object]], current: Sequence[Sequence[object]], file: str, name: str
) -> LineGrowth | None:
    """The line that grew most of function `name` as the function rule names it (its
    comprehensions and lambdas included), from the pooled samples; None if never sampled."""
    before, after = _by_line(baseline), _by_line(current)
    if not any(k[0] == file and function_of(k[1]) == name for k in after):
        return None
    found = _growth(before, after, file, lambda q: function_of(q) == name)
    return LineGrowth(file, name, found.line, found.baseline_cpu_s, found.cpu_s)


# The function rule. Each run of each side reports, per function of its tree, its sampled CPU
# time and the samples it rests on (worker.py). Per side, a function's share is its sampled
# time pooled over the side's runs / all sampled time pooled; its CPU time per run is that share
# x the test's CPU time, so its ratio current / baseline is
#     ratio_f = (share_current / share_baseline) x (the median of the paired test ratios).
# The share ratio does not move with the machine's speed (a slow phase slows the whole run);
# its error is estimated from the runs themselves (the ratio estimator's linearization: the
# variance of a pooled share over runs, both sampling and run-to-run variation). A function
# fails the test when its ratio is above FUNCTION_FAIL_ABOVE and its share grew by more than
# FUNCTION_Z standard errors; it is unsure, and the pairs go on to the next stage, when its
# ratio is above FUNCTION_FAIL_ABOVE but the growth of its share is not yet that clear.
# Functions with fewer than FUNCTION_MIN_SAMPLES samples on either side are not judged.
# The shares are of self time (the samples whose innermost frame in the tree is the function's):
# each sample counts once, which the rule's error estimate assumes. Each judged function's
# inclusive ratio (its callees' time included: what timeit would show) is computed the same way
# from its inclusive time pooled over the same runs, share ratio x the test's median ratio, and
# shown first; it only vetoes: a function whose self time fails while its inclusive ratio is at or
# under the threshold has "moved" (on cattrs' benchmarks an unchanged function read self 1.23x at
# 4.2 standard errors, inclusive 1.08x, its test 0.95x). Pooled rather than a median of per-pair
# ratios: a function with a few samples per run has per-run ratios of small counts (0/3, 5/2),
# whose median is not its ratio; the test's median ratio already carries the pairing's robustness
# to machine phases.
FUNCTION_FAIL_ABOVE = 1.10
FUNCTION_Z = 4.0
FUNCTION_MIN_SAMPLES = 20
# A function's extra time is its test's extra time, unless another function's time fell as much:
# time that moved between functions (threads contending for a lock poll in one place or
# another, filelock's suite) is not a slowdown. A function fails only where the test grew by at
# least half the function's growth, less this much of the test's time (the test ratio's noise).
FUNCTION_MOVED_SLACK = 0.10
FUNCTION_MAX_PAIRS = MAX_PAIRS


@dataclass(frozen=True)
class FunctionVerdict:
    file: str
    function: str
    ratio: float  # its estimated CPU time per run, current / baseline
    share_ratio: float  # its share of the sampled time, current / baseline
    z: float  # log(share_ratio) / its standard error
    baseline_share: float
    share: float
    samples: tuple[int, int]  # baseline, current
    state: str  # "fail" | "pass" | "unsure" | "moved" (grew while the test did not: passes)
    inclusive_ratio: float | None = None  # the same with its callees' time; None: not sampled


Runs = Sequence[Mapping[tuple[str, str], tuple[float, int]]]  # per run: function -> (cpu_s, n)


def _pooled_share(runs: Runs, key: tuple[str, str], workers: int = 1) -> tuple[float, float, int]:
    """The function's share of the sampled time pooled over `runs`, the relative variance of
    that share (linearized), and its samples. Run i ran in worker i % `workers`: the variance
    is the larger of the runs' and the workers' (each worker's runs pooled as one), since a
    process can differ from its side's others as a whole (its layout, its caches' history:
    on cattrs' benchmarks one worker of three read 20% apart in every pair it ran)."""
    mine = [run.get(key, (0.0, 0)) for run in runs]
    totals = [sum(w for w, _ in run.values()) for run in runs]
    total = sum(totals)
    if total <= 0:
        return 0.0, math.inf, 0
    own = sum(w for w, _ in mine)
    share = own / total
    samples = sum(c for _, c in mine)
    if own <= 0 or len(runs) < 2:
        return share, math.inf, samples
    owns = [w for w, _ in mine]
    variance = _share_variance(owns, totals, share)
    if workers > 1 and len(runs) >= 2 * workers:
        worker_owns = [sum(owns[k::workers]) for k in range(workers)]
        worker_totals = [sum(totals[k::workers]) for k in range(workers)]
        variance = max(variance, _share_variance(worker_owns, worker_totals, share))
    return share, variance / share**2, samples


def _share_variance(owns: list[float], totals: list[float], share: float) -> float:
    """The variance of a ratio estimator sum(owns) / sum(totals) over its units (runs, or
    workers), linearized: the residuals' spread over the units. A residual within rounding of
    zero is zero: units whose shares are all equal have no spread, in whatever order they are
    summed (rounding alone gave a z of 2.7e15 one way and infinity the other)."""
    n = len(owns)
    mean_total = sum(totals) / n
    residuals = [
        0.0 if math.isclose(w, share * t, rel_tol=1e-12) else (w - share * t) / mean_total
        for w, t in zip(owns, totals, strict=True)
    ]
    return n / (n - 1) * sum(e * e for e in residuals) / n**2


def _inclusive_share(runs: Runs, inclusive: Runs, key: tuple[str, str]) -> float:
    """The function's inclusive time pooled over the runs / all sampled time (self, where
    each sample counts once)."""
    total = sum(w for run in runs for w, _ in run.values())
    own = sum(run.get(key, (0.0, 0))[0] for run in inclusive)
    return own / total if total > 0 else 0.0


def inclusive_ratio(
    test_ratio: float,
    baselines: tuple[Runs, Runs],
    currents: tuple[Runs, Runs],
    key: tuple[str, str],
) -> float | None:
    """Its inclusive CPU time per run, current / baseline, from each side's (self runs,
    inclusive runs); None where a side has no inclusive time for it."""
    if not baselines[1] or not currents[1]:
        return None
    before = _inclusive_share(*baselines, key)
    after = _inclusive_share(*currents, key)
    return after / before * test_ratio if before > 0 and after > 0 else None


def judge_functions(
    ratios: Sequence[float],
    baseline_runs: Runs,
    current_runs: Runs,
    fail_above: float | None = None,
    z_limit: float | None = None,
    min_samples: int | None = None,
    baseline_inclusive: Runs = (),
    current_inclusive: Runs = (),
    workers: int = 1,
) -> list[FunctionVerdict]:
    """Each function sampled on both sides, judged by the function rule on its self time;
    failing ones first, then by ratio. Each carries its inclusive ratio when the inclusive runs
    are given."""
    fail_above = FUNCTION_FAIL_ABOVE if fail_above is None else fail_above
    z_limit = FUNCTION_Z if z_limit is None else z_limit
    min_samples = FUNCTION_MIN_SAMPLES if min_samples is None else min_samples
    if not ratios or not baseline_runs or not current_runs:
        return []
    test_ratio = median_ratio(ratios)
    keys = set().union(*baseline_runs) & set().union(*current_runs)
    found = []
    for key in keys:
        before, before_var, before_n = _pooled_share(baseline_runs, key, workers)
        after, after_var, after_n = _pooled_share(current_runs, key, workers)
        if min(before_n, after_n) < min_samples or before <= 0 or after <= 0:
            continue
        share_ratio = after / before
        error = math.sqrt(before_var + after_var)
        growth = math.log(share_ratio)
        z = growth / error if error > 0 else math.copysign(math.inf, growth) if growth else 0.0
        ratio = share_ratio * test_ratio
        inclusive = inclusive_ratio(
            test_ratio, (baseline_runs, baseline_inclusive), (current_runs, current_inclusive), key
        )
        state = "pass"
        if ratio > fail_above:
            state = "fail" if z > z_limit else "unsure"
            grown = after * test_ratio - before  # in the baseline test's time
            if test_ratio - 1 < grown / 2 - FUNCTION_MOVED_SLACK:
                state = "moved"
            elif state == "fail" and inclusive is not None and inclusive <= fail_above:
                state = "moved"  # its own lines took time from its callees: timeit reads no more
        counts = (before_n, after_n)
        found.append(
            FunctionVerdict(*key, ratio, share_ratio, z, before, after, counts, state, inclusive)
        )
    order = {"fail": 0, "unsure": 1, "moved": 2, "pass": 3}
    return sorted(found, key=lambda f: (order[f.state], -f.ratio, f.file, f.function))


def suspects(functions: Sequence[FunctionVerdict]) -> set[tuple[str, str]]:
    """In a passing reading, the functions whose share clearly grew (z above FUNCTION_Z) while
    their ratio stayed at or under FUNCTION_FAIL_ABOVE: the side's process as a whole may have
    read fast; ab_run.py measures such a test again in fresh workers."""
    return {
        (f.file, f.function)
        for f in functions
        if f.state == "pass" and f.z > FUNCTION_Z and f.ratio > 1.0
    }


def confirms(again: Sequence[FunctionVerdict], suspected: set[tuple[str, str]]) -> bool:
    """Whether a failing reading in fresh workers bears out a suspect pass: a suspected
    function's share clearly grew again. A failure without it is the noise of the second
    reading alone (on cattrs' benchmarks a reading of 0.67x, then one of 1.19x in which no
    function's share grew)."""
    return any(
        (f.file, f.function) in suspected and f.z > FUNCTION_Z and f.share_ratio > 1.0
        for f in again
    )
