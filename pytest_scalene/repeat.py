"""`--profile-repeat N` (or a duration such as `10s`): the call phase runs N times (or until the
runs have lasted that long), each run profiled on its own, and the test keeps one profile
combining them, to damp noise:
- CPU figures (the test's and every line's) come from the fastest run, the one with the least
  CPU time. Interference from other processes only ever adds CPU time, so the fastest run is the
  one nearest to the code's own cost: on our shared 2-core VM the fastest of 3 runs varied by
  -7%/+29% around its median where single runs varied by -13%/+50% (docs/baselines.md).
- Every other number (memory, copy rates, GPU) is the median over the runs, a line that a run
  did not reach counting as 0 there; figures that are not numbers (the leak list, timelines)
  come from the fastest run.

The test function is called again through `item.runtest()` with the fixture values of the first
call: setup and teardown run once.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from .model import LineKey, LineStats, TestProfile
from .profiler import Profiler


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _median_extra(dicts: list[dict[str, Any]], fallback: dict[str, Any], fill: bool) -> dict:
    """Medians of the numeric keys; others from `fallback`. `fill`: a key missing from a run
    counts as 0 (a line a run did not touch), else it is left out of that key's median."""
    merged: dict[str, Any] = {}
    for name in sorted({k for d in dicts for k in d}):
        values = [d.get(name, 0.0) if fill else d[name] for d in dicts if fill or name in d]
        if all(_is_number(v) for v in values):
            merged[name] = statistics.median(values)
        elif name in fallback:
            merged[name] = fallback[name]
        else:
            merged[name] = next(d[name] for d in dicts if name in d)
    return merged


_CPU_FIELDS = ("cpu_python_s", "cpu_native_s", "cpu_system_s", "samples")


def combine_runs(runs: list[TestProfile]) -> TestProfile:
    """One profile for `runs` of the same test: CPU from the fastest, the rest medians."""
    if len(runs) == 1:
        return runs[0]
    fastest = min(runs, key=lambda p: p.cpu_s)
    merged = TestProfile(
        fastest.nodeid,
        outcome=runs[-1].outcome,
        elapsed_s=fastest.elapsed_s,
        cpu_python_s=fastest.cpu_python_s,
        cpu_native_s=fastest.cpu_native_s,
        cpu_system_s=fastest.cpu_system_s,
        extra=_median_extra([p.extra for p in runs], fastest.extra, fill=False),
    )
    keys: set[LineKey] = {k for p in runs for k in p.lines}
    for key in sorted(keys):
        present = next(p.lines[key] for p in runs if key in p.lines)
        cpu = fastest.lines.get(key, LineStats())
        every = [p.lines.get(key, LineStats()) for p in runs]
        fallback = fastest.lines[key].extra if key in fastest.lines else {}
        merged.lines[key] = LineStats(
            present.function_line,
            **{name: getattr(cpu, name) for name in _CPU_FIELDS},
            extra=_median_extra([s.extra for s in every], fallback, fill=True),
        )
    merged.extra["repeat"] = len(runs)
    return merged


MAX_RUNS = 1000  # with a duration: a test of next to no time stops here


def run_again(
    profiler: Profiler, nodeid: str, times: int, call: Callable[[], object], until_s: float = 0.0
) -> None:
    """Run `call` `times` more times, then more while the wall times of all runs add up to less
    than `until_s` (at most MAX_RUNS runs), each profiled apart, and replace the test's profile
    (the first run's, already in the session) with the combination of all runs. An exception
    from a repeat propagates: the test fails as it would have on its first call."""
    tests = profiler.session.tests
    runs = [tests.pop(nodeid)]

    def wanted() -> bool:
        if len(runs) <= times:
            return True
        return sum(r.elapsed_s for r in runs) < until_s and len(runs) < MAX_RUNS

    try:
        while wanted():
            with profiler.profiling(nodeid):
                call()
            runs.append(tests.pop(nodeid))
    finally:
        tests[nodeid] = combine_runs(runs)
