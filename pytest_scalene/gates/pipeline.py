"""The one path from a test's profile to its verdicts.

Every gate is a `Judge`: perf_budget markers (gates/judging.py), the stored baselines, whose
figures are sampled or counted under valgrind (gates/baseline_judge.py), the history
(history/history_gate.py) and the A/B comparison against a git ref (compare_ref/ref_judge.py).
`confirm` is the one loop that re-runs a test whose timed CPU figure a judge suspects;
`judge_report` is the one place a report fails, with every judge's failed verdicts, and where
the profile gets them all (TestProfile.verdicts, which every output reads by field).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import NamedTuple, Protocol

import pytest

from ..core import extra_keys
from ..core.model import TestProfile
from ..core.verdict import Verdict
from ..sampling.profiler import Profiler
from .machine_speed import note_probe
from .repeat import CONFIRM_PAUSES_S, MACHINE_PAUSES_S, rerun_of, run_again


class Unjudged(NamedTuple):
    """Why a gate could not judge a passing test, as the end of the output names it."""

    gate: str  # e.g. "the history (--profile-compare-history)"
    fails: bool = True  # False: nothing to compare with yet (a new test), noted, never a failure


class Judge(Protocol):
    """One gate. Its verdicts are asked for a passed test's call phase only: a failing test's
    figures are not those of a pass."""

    confirms_cpu: bool  # whether it asks for re-runs of a timed CPU regression
    # Whether it may judge a test without a perf_budget marker. A session none of whose judges
    # does (plain --profile) asks them about marked tests only: judging cost every test ~100
    # bytecodes to find nothing to judge. Read once the session has started.
    every_test: bool

    def verdicts(self, item: pytest.Item, profile: TestProfile) -> list[Verdict]: ...

    def cpu_suspect(self, item: pytest.Item, profile: TestProfile) -> str | None:
        """The message of a timed CPU regression to confirm by running again, or None."""
        ...

    def waits_for_machine(self, item: pytest.Item, profile: TestProfile) -> bool:
        """Whether the suspect's figure was saved on a machine running faster than it runs now
        (gates/machine_speed.py): the confirmation goes on, waiting for it."""
        ...

    def unjudged(self, profile: TestProfile) -> Unjudged | None:
        """Whether this gate, asked for, could not judge the passing test: a gate that cannot
        judge says so (exit status 7 unless --profile-allow-unjudged), never passes silently."""
        ...


# When a test's suspect outlasted every round with the machine still slower than at the save,
# the tests confirmed within this many seconds after it skip the machine's rounds (20 s of
# pauses each): a slow phase that outlasts them is met by every gated test in it, and a suite of
# a hundred would wait half an hour to be told, test by test, what the first one found.
SLOW_MACHINE_MEMORY_S = 60.0


class SlowMachine:
    """When a suspect's wait for the machine last ran out, in one session (a session's, not the
    process's: pytest.main() run again within the minute waits afresh)."""

    def __init__(self) -> None:
        self.ran_out_at = -float("inf")  # time.monotonic()

    def recent(self) -> bool:
        return time.monotonic() - self.ran_out_at < SLOW_MACHINE_MEMORY_S


def confirm(
    profiler: Profiler,
    item: pytest.Item,
    judges: Sequence[Judge],
    runs: int,
    slow_machine: SlowMachine,
) -> None:
    """A timed CPU regression must survive more runs after pauses before it fails: on a shared
    machine another process can slow every run of a test for seconds. Each round re-runs the
    call `runs` times; the fastest of all runs is what the judges then judge (docs/baselines.md,
    the noise rule). The machine's speed is timed beside the runs (gates/machine_speed.py), and
    while a judge's figure was saved on a faster machine than this one is now, up to
    MACHINE_PAUSES_S more rounds wait for it (not where another test's wait ran out within
    SLOW_MACHINE_MEMORY_S). The re-runs change only the CPU figures, never the counted ones."""
    confirming = [judge for judge in judges if judge.confirms_cpu]
    nodeid = item.nodeid
    waited_out = slow_machine.recent()

    def waiting(profile: TestProfile) -> bool:
        return any(judge.waits_for_machine(item, profile) for judge in confirming)

    for index, pause in enumerate((*CONFIRM_PAUSES_S, *MACHINE_PAUSES_S)):
        profile = profiler.session.tests[nodeid]
        if extra_keys.NOT_REPEATABLE in profile.extra:
            return  # no more runs: judged on those it had
        if not any(judge.cpu_suspect(item, profile) for judge in confirming):
            return
        if index == 0:
            note_probe(profile)  # beside the runs so far
        elif index >= len(CONFIRM_PAUSES_S) and (waited_out or not waiting(profile)):
            return
        time.sleep(pause)
        # rerun_of: the re-run's subtests, warnings and unittest records are not counted again
        run_again(profiler, nodeid, runs, rerun_of(item), probe=True)
    profile = profiler.session.tests[nodeid]
    if any(judge.cpu_suspect(item, profile) for judge in confirming) and waiting(profile):
        slow_machine.ran_out_at = time.monotonic()


def judge_report(
    judges: Sequence[Judge], item: pytest.Item, report: pytest.TestReport, profile: TestProfile
) -> list[Verdict]:
    """The call phase's report: every judge's verdicts onto the profile, in the judges' order;
    a failed one fails the report, naming the metric, the limit, the value and the line. A
    judge that raises fails it too: a bug in a gate must never pass a test silently."""
    if not report.passed:
        return []
    verdicts: list[Verdict] = []
    errors: list[str] = []
    for judge in judges:
        try:
            verdicts += judge.verdicts(item, profile)
        except Exception as exc:
            errors.append(f"pytest-scalene could not check this test's gates: {exc!r}")
    if verdicts:
        profile.verdicts = verdicts
    failures = [v.message for v in verdicts if v.failed] + errors
    if failures:
        report.outcome = "failed"
        report.longrepr = "\n".join(failures)
        profile.outcome = "failed"
    return verdicts


def unjudged_counts(
    judges: Sequence[Judge], profiles: Iterable[TestProfile]
) -> dict[Unjudged, int]:
    """Per gate, the passing tests it could not judge (a failing test is never judged): those
    that fail the run first, in the judges' order, then those that only note."""
    found: dict[Unjudged, int] = {}
    for profile in profiles:
        if profile.outcome != "passed":
            continue
        for judge in judges:
            if (why := judge.unjudged(profile)) is not None:
                found[why] = found.get(why, 0) + 1
    return dict(sorted(found.items(), key=lambda item: not item[0].fails))
