"""A test whose instruction count moved from its baseline, either way, is counted again in a second
session of the same tests, in the same order, before it is judged: a count that moves between
sessions (threads polling a lock, an event loop: on filelock's own suite -27% to +37% on unchanged
code) is not judged, and says why, in every run; one that repeats is judged as counted."""

from __future__ import annotations

import dataclasses

from pytest_scalene.core.model import COUNTED_CALLS_KEY
from pytest_scalene.gates.baseline_judge import counts_moved
from pytest_scalene.gates.comparison import NoiseRule
from pytest_scalene.instructions import counts, runner

PERF = {"callgrind_options": "--tool=callgrind -X perf"}


def _counted(total: int, locker: int) -> runner.Counted:
    return runner.Counted(total, {"t.py::test": total, "t.py::locker": locker}, PERF)


class FakeBaselines:
    """Every test's stored count is 1,000,000 (locker 400,000)."""

    def counts_rule(self) -> NoiseRule:
        return NoiseRule()

    def counted_moved(self, nodeid: str, counted) -> bool:
        stored = counts.entry_of(_counted(1_000_000, 400_000))
        base = dataclasses.replace(stored, environment=counted.environment)  # one environment
        return counts_moved(base, counted, self.counts_rule())


def _counts(
    first: dict, second: dict, calls_asked: list | None = None
) -> tuple[counts.InstructionCounts, list[list[str]]]:
    found = counts.InstructionCounts.__new__(counts.InstructionCounts)
    found.counts = dict(first)
    sessions: list[list[str]] = []

    def count(nodeids: list[str], why: str = "", calls: dict | None = None) -> None:
        sessions.append(list(nodeids))
        if calls_asked is not None:
            calls_asked.append(calls)
        found.counts = {n: second.get(n, first[n]) for n in nodeids}  # else: as first counted

    found._count = count  # type: ignore[method-assign]
    return found, sessions


def test_a_count_that_moves_between_sessions_is_not_judged_one_that_repeats_is():
    first = {
        "t.py::test_steady": _counted(1_000_000, 400_000),  # as stored: not counted again
        "t.py::test_threads": _counted(1_060_000, 460_000),  # reads +6%...
        "t.py::test_slowed": _counted(1_080_000, 480_000),  # reads +8%...
    }
    second = {
        "t.py::test_threads": _counted(1_010_000, 410_000),  # ...then +1%: it moves
        "t.py::test_slowed": _counted(1_080_500, 480_400),  # ...and again +8%: it repeats
    }
    found, sessions = _counts(first, second)
    found.confirm(FakeBaselines())  # type: ignore[arg-type]
    # The whole first session again, in its order: a count includes what earlier tests left.
    assert sessions == [["t.py::test_steady", "t.py::test_threads", "t.py::test_slowed"]]
    assert found.counts["t.py::test_steady"] == first["t.py::test_steady"]
    assert found.counts["t.py::test_slowed"] == first["t.py::test_slowed"]  # judged: it fails
    note = found.counts["t.py::test_threads"]
    assert isinstance(note, str) and "moved between two counting sessions" in note
    assert "1,060,000 then 1,010,000" in note and "--profile-compare-ref" in note


def test_a_count_that_came_out_lower_is_counted_again_too():
    # A timing-dependent count reads lower as often as higher: judged only when it went up,
    # it was "not judged" in some runs and passed in the others.
    first = {
        "t.py::test_polls": _counted(730_000, 130_000),  # -27%...
        "t.py::test_faster": _counted(900_000, 300_000),  # -10%...
    }
    second = {
        "t.py::test_polls": _counted(1_370_000, 770_000),  # ...then +37%: it depends on timing
        "t.py::test_faster": _counted(900_100, 300_050),  # ...and again -10%: an improvement
    }
    found, sessions = _counts(first, second)
    found.confirm(FakeBaselines())  # type: ignore[arg-type]
    assert sessions == [["t.py::test_polls", "t.py::test_faster"]]
    assert "moved between two counting sessions" in str(found.counts["t.py::test_polls"])
    assert found.counts["t.py::test_faster"] == first["t.py::test_faster"]  # judged: it passes


def test_a_benchmark_test_is_confirmed_over_as_many_calls_as_it_was_counted():
    per_call = {**PERF, COUNTED_CALLS_KEY: "64"}
    first = {
        "t.py::test_bench": runner.Counted(1_080_000, {"t.py::test": 1_080_000}, per_call),
        "t.py::test_slowed": _counted(1_080_000, 480_000),
    }
    second = {n: first[n] for n in first}
    asked: list = []
    found, sessions = _counts(first, second, asked)
    found.confirm(FakeBaselines())  # type: ignore[arg-type]
    assert asked == [{"t.py::test_bench": 64}]  # the test counted whole: sized as ever


def test_no_suspect_no_second_session():
    found, sessions = _counts({"t.py::test_a": _counted(1_000_000, 400_000)}, {})
    found.confirm(FakeBaselines())  # type: ignore[arg-type]
    assert sessions == []


def test_moved_reads_both_ways_and_the_functions():
    rule = NoiseRule()
    assert not counts.moved(_counted(1_000_000, 400_000), _counted(1_001_000, 400_500), rule)
    assert counts.moved(_counted(1_000_000, 400_000), _counted(950_000, 380_000), rule)  # down
    # The test's total steady, one function +25%: the function rule would fail it, so it moved.
    assert counts.moved(_counted(1_000_000, 100_000), _counted(1_000_000, 125_000), rule)
