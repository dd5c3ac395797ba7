"""`--profile-repeat N` (or a duration such as `10s`): the call phase runs N times (or until the
runs have lasted that long), each run profiled on its own, and the test keeps one profile
combining them, to damp noise. Baselines and comparisons combine the same way, so that both sides
of a comparison measure alike (docs/baselines.md, "Which run each figure comes from"):
- CPU figures (the test's and every line's) come from the fastest run, the one with the least
  CPU time. Interference from other processes only ever adds CPU time, so the fastest run is the
  one nearest to the code's own cost: on our shared 2-core VM the fastest of 3 runs varied by
  -7%/+29% around its median where single runs varied by -13%/+50%. The first run is among the
  candidates: its warm-up (fresh pages, cold caches, first calls) only adds CPU time, which
  leaves it out on its own, while a machine that slows down after it (CI once ran every run of a
  10 s save 1.28x slower than the first) would otherwise leave a slow baseline that hides a 2x
  slowdown.
- Every other figure (memory, copy volume and rate, leaks, GPU, timelines, the wall time) comes
  from the first run. These are counted, not timed, and the first run is the one a test with a
  single run has too: a repeat never changes them, and a baseline saved with N runs compares
  with a run of M.

The test function is called again through `item.runtest()` with the fixture values of the first
call: setup and teardown run once. A repeat never changes the test's outcome: a run that fails or
skips (a test that is not idempotent) ends the repeats, its profile is dropped, and the test is
judged on the runs before it, with a "not repeatable" note (extra["not_repeatable"]). Nor does it
change
pytest's counts: what a repeat reports of itself (subtests' reports, the warnings it raises)
reaches no plugin (`quiet_rerun`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from ..core import extra_keys
from ..core.model import LineStats, TestProfile
from ..sampling.profiler import Profiler
from .machine_speed import fastest

try:  # pytest 9+: its count of failed subtests per node
    from _pytest.subtests import failed_subtests_key as _FAILED_SUBTESTS
except ImportError:
    _FAILED_SUBTESTS = None  # type: ignore[assignment]

_CPU_FIELDS = ("cpu_python_s", "cpu_native_s", "cpu_system_s", "samples")
SKIPPED = "cpu_sampling_skipped"


def _counted_extra(first: LineStats | None, other: LineStats) -> dict[str, Any]:
    """A line's non-CPU figures: the first run's, or zeros where the first run had no such line."""
    if first is not None:
        return dict(first.extra)
    return {k: 0.0 for k, v in other.extra.items() if isinstance(v, (int, float))}


def combine_runs(runs: list[TestProfile]) -> TestProfile:
    """One profile for `runs` of the same test (module doc); runs[0] is the test's first run,
    or the combination of its earlier runs (a confirmation's)."""
    if len(runs) == 1:
        return runs[0]
    first = runs[0]
    fastest = min(runs, key=lambda p: p.cpu_s)
    merged = TestProfile(
        first.nodeid,
        outcome=runs[-1].outcome,
        elapsed_s=first.elapsed_s,
        cpu_python_s=fastest.cpu_python_s,
        cpu_native_s=fastest.cpu_native_s,
        cpu_system_s=fastest.cpu_system_s,
        extra=dict(first.extra),
    )
    merged.extra.pop(SKIPPED, None)  # CPU sampling skipped goes with the CPU figures
    if SKIPPED in fastest.extra:
        merged.extra[SKIPPED] = fastest.extra[SKIPPED]
    for key in sorted(first.lines.keys() | fastest.lines.keys()):
        counted, cpu = first.lines.get(key), fastest.lines.get(key) or LineStats()
        seen = counted or cpu  # the line as one of the two runs saw it
        merged.lines[key] = LineStats(
            seen.function_line,
            **{name: getattr(cpu, name) for name in _CPU_FIELDS},
            extra=_counted_extra(counted, cpu),
        )
    merged.extra[extra_keys.REPEAT] = len(runs)
    # Every timed run's CPU time, for the baseline's distribution (baseline_entry.cpu_distribution)
    earlier = first.extra.get(extra_keys.CPU_RUNS, [round(first.cpu_s, 6)])
    merged.extra[extra_keys.CPU_RUNS] = [*earlier, *(round(r.cpu_s, 6) for r in runs[1:])]
    span = first.extra.get(extra_keys.CPU_RUNS_SPAN_S, first.elapsed_s)
    merged.extra[extra_keys.CPU_RUNS_SPAN_S] = round(span + sum(r.elapsed_s for r in runs[1:]), 6)
    return merged


MAX_RUNS = 1000  # with a duration: a test of next to no time stops here
# Pauses before each confirmation of a CPU regression (against a baseline or the history): with
# the runs, the rounds span ~10 s, longer than the slowest CPU phase seen on the development VM
# (6.5 s; docs/baselines.md).
CONFIRM_PAUSES_S = (0.5, 1.0, 2.0, 4.0)
# More rounds, while the machine runs slower than when the baseline was saved
# (gates/machine_speed.py): in 7 minutes measured on the development VM (2026-11-27) the probe
# read more than 1.15x its fastest 85% of the time, in stretches of up to 30 s; with these
# rounds the confirmation spans ~28 s of pauses.
MACHINE_PAUSES_S = (2.0, 2.0, 4.0, 4.0, 8.0)


# Hooks through which a test's call reports on itself while it runs (pytest's `subtests` fixture
# and unittest's subTest send a report per subtest): a repeat's must not count again.
QUIET_HOOKS = ("pytest_runtest_logreport", "pytest_exception_interact")


class SubtestFailed(AssertionError):
    """A subtest failed in a repeat: the repeat did not pass."""


def _failed_subtests(config: pytest.Config) -> dict[Any, int] | None:
    """pytest's count of failed subtests per node (pytest 9+), which fails a passed test."""
    return None if _FAILED_SUBTESTS is None else config.stash.get(_FAILED_SUBTESTS, None)


@contextmanager
def quiet_rerun(item: pytest.Item) -> Iterator[list[Any]]:
    """While `item`'s call runs again: the QUIET_HOOKS calls reach no plugin (they are yielded
    instead, so that a failed subtest can be seen), pytest's failed-subtest count is restored,
    and the warnings raised are recorded apart and dropped, the filters left as they are (an
    "error" filter still raises). pluggy's hook calls all go through the plugin manager's
    `_inner_hookexec`, the point its own tracing wraps."""
    manager = item.config.pluginmanager
    inner = getattr(manager, "_inner_hookexec", None)  # absent: the reports go through
    held: list[Any] = []

    def hookexec(name: str, impls: Any, kwargs: Any, firstresult: bool) -> Any:
        if name in QUIET_HOOKS:
            held.append(kwargs.get("report"))
            return None if firstresult else []
        return inner(name, impls, kwargs, firstresult)

    counts = _failed_subtests(item.config)
    counted = dict(counts) if counts is not None else {}
    if inner is not None:
        manager._inner_hookexec = hookexec
    try:
        with warnings.catch_warnings(record=True):
            yield held
    finally:
        if inner is not None:
            manager._inner_hookexec = inner
        if counts is not None:
            counts.clear()
            counts.update(counted)


def rerun_of(item: pytest.Item) -> Callable[[], None]:
    """`item.runtest` for a repeat, raising what a unittest TestCase records instead of raising
    (a skip, a failure): pytest reports such records at the next phase, so a repeat's record
    left there would count the test twice (a skipped test as two skips). It reports nothing of
    itself (`quiet_rerun`); a subtest that fails raises SubtestFailed."""

    def call() -> None:
        records = getattr(item, "_excinfo", None) or []
        before = len(records)
        with quiet_rerun(item) as held:
            item.runtest()
        records = getattr(item, "_excinfo", None) or []
        if len(records) > before:
            new = records[before:]
            del records[before:]
            raise new[0].value
        failed = [r for r in held if getattr(r, "failed", False)]
        if failed:
            raise SubtestFailed(f"{len(failed)} subtest(s) failed")

    return call


def first_run_recorded_outcome(item: pytest.Item) -> bool:
    """A unittest TestCase that skipped or failed records it instead of raising, and a test
    whose subtests failed is failed at its report: no repeats."""
    counts = _failed_subtests(item.config)
    failed = counts.get(getattr(item, "id", item.nodeid), 0) if counts else 0
    return bool(getattr(item, "_excinfo", None)) or failed > 0


def _what_happened(exc: BaseException) -> str:
    if isinstance(exc, pytest.skip.Exception):
        return "was skipped"
    text = str(exc).strip().splitlines()
    return f"failed ({type(exc).__name__}{': ' + text[0][:80] if text else ''})"


def run_again(
    profiler: Profiler,
    nodeid: str,
    times: int,
    call: Callable[[], object],
    until_s: float = 0.0,
    probe: bool = False,
) -> str | None:
    """Run `call` `times` more times, then more while the wall times of all runs add up to less
    than `until_s` (at most MAX_RUNS runs), each profiled apart, and replace the test's profile
    (already in the session: the first run's, or a combination of earlier runs) with the
    combination of all runs.
    A run that raises (fails, skips) ends the repeats without changing the test's outcome: its
    profile is dropped and the others combined, the profile noting it under "not_repeatable";
    the note is returned (None when every run passed). An interrupt (Ctrl-C, pytest.exit)
    propagates. `probe`: the machine's speed is timed beside each run (machine_speed.py), its
    fastest reading (with the earlier runs') kept with the combined profile."""
    tests = profiler.session.tests
    runs = [tests.pop(nodeid)]
    # the probe's fastest reading beside these runs and the earlier ones (in runs[0])
    machine_s = runs[0].extra.get(extra_keys.MACHINE_S)
    note = runs[0].extra.get(extra_keys.NOT_REPEATABLE)

    def wanted() -> bool:
        if len(runs) <= times:
            return True
        return sum(r.elapsed_s for r in runs) < until_s and len(runs) < MAX_RUNS

    try:
        while note is None and wanted():
            try:
                with profiler.profiling(nodeid):
                    call()
            except (KeyboardInterrupt, pytest.exit.Exception):
                tests.pop(nodeid, None)
                raise
            except BaseException as exc:  # the test's outcome is its first run's
                tests.pop(nodeid, None)
                first = "its first run" if len(runs) == 1 else f"its first {len(runs)} runs"
                note = (
                    f"not repeatable: run {len(runs) + 1} {_what_happened(exc)}; judged on {first}"
                )
                break
            runs.append(tests.pop(nodeid))
            if probe:
                machine_s = fastest(machine_s)
    finally:
        combined = tests[nodeid] = combine_runs(runs)
        if machine_s is not None:
            combined.extra[extra_keys.MACHINE_S] = machine_s
        if note is not None:
            combined.extra[extra_keys.NOT_REPEATABLE] = note
    return note
