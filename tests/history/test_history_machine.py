"""The machine's speed beside the history's CPU times (gates/machine_speed.py): each recorded
test keeps it, the confirmation of a CPU regression against history waits for a machine that
runs slower than in the recorded runs, and a growth that its slowdown explains is not judged
(exit status 7, saying why) while one it does not explain still fails. The probe's readings are
set by the test (PROBE_MS), the test's own CPU time is real."""

from __future__ import annotations

import json
import sqlite3

import pytest
from test_machine_speed import CONFTEST, SUITE, _run

from pytest_scalene.gates.noise_rule import NoiseRule
from pytest_scalene.history.connect import open_store
from pytest_scalene.history.recent_runs import judge
from pytest_scalene.history.run_records import RunRecord, TestRecord

NODE = "test_work.py::test_work"
HISTORY = ("--profile-history=h.db",)


def _stored_machine_s(db) -> list[float | None]:
    with sqlite3.connect(db) as conn:
        return [row[0] for row in conn.execute("SELECT machine_s FROM scalene_results")]


@pytest.fixture
def recorded(pytester: pytest.Pytester, monkeypatch) -> pytest.Pytester:
    """One real run recorded on a machine whose probe reads 1 ms, and 8 more like it."""
    pytester.makepyfile(test_work=SUITE, conftest=CONFTEST)
    _run(pytester, monkeypatch, *HISTORY, PROBE_MS="1.0").assert_outcomes(passed=1)
    db = pytester.path / "h.db"
    assert _stored_machine_s(db) == [0.001]
    with open_store(str(db)) as store:
        (run,) = store.runs()
        (point,) = store.series([run])[NODE]
        info, options = map(
            json.loads, store._execute("SELECT machine_info, options FROM scalene_runs")[0]
        )
        for k in range(8):
            cpu_s = point.metrics["cpu_s"] * (1 + 0.01 * k)
            test = TestRecord(NODE, "passed", {"cpu_s": cpu_s}, [], (), machine_s=0.001)
            copy = RunRecord(
                f"copy{k}", 2.0 + k, "c", "main", False, run.machine, info, options, (test,)
            )
            store.record(copy)
    return pytester


def test_a_growth_the_machine_explains_is_not_judged_against_history(recorded, monkeypatch):
    result = _run(
        recorded, monkeypatch, *HISTORY, "--profile-compare-history", FACTOR="4", PROBE_MS="6.0"
    )
    result.assert_outcomes(passed=1)
    assert result.ret == 7, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*CPU time not judged against history: * vs median * of the last 9 runs (+*%), but "
            "the machine runs 6.00x slower than in those runs*6.00 ms now, 1.00 ms then*"
        ]
    )


def test_growth_beyond_the_machine_fails_against_history(recorded, monkeypatch):
    for factor, probe in (("5", "1.0"), ("8", "1.25")):
        result = _run(
            recorded, monkeypatch, *HISTORY, "--profile-compare-history",
            FACTOR=factor, PROBE_MS=probe,
        )  # fmt: skip
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines(["*CPU time regressed against history: *"])
        result.stdout.no_fnmatch_line("*not judged*")


def test_the_history_confirmation_waits_for_the_machine(recorded, monkeypatch):
    # Unchanged code in a slow phase (6x, the probe 6x too) that outlasts the four confirmation
    # rounds (runs 1-5) and ends at the seventh run: judged then, and it passes.
    result = _run(
        recorded, monkeypatch, *HISTORY, "--profile-compare-history",
        PROBE_MS="1.0", SLOW_PROBE_MS="6.0", SLOW_RUNS="6",
    )  # fmt: skip
    result.assert_outcomes(passed=1)
    assert result.ret == 0, result.stdout.str()
    assert int((recorded.path / "runs.txt").read_text()) == 7
    assert _stored_machine_s(recorded.path / "h.db")[-1] == 0.001  # the fastest of the rounds


PAST = [{"cpu_s": 1.0 + 0.01 * k, "machine_s": 0.001} for k in range(9)]
RULE = NoiseRule.for_run(None, 0.01, 10_485_767)


@pytest.mark.parametrize(
    "cpu_s, machine_now, judged",
    [
        (3.0, 0.004, "not judged"),  # 4x slower: 3x the CPU time is explained
        (6.0, 0.004, "regressed"),  # not by 4x
        (3.0, 0.0011, "regressed"),  # within the probe's own spread: the same machine
        (3.0, None, "regressed"),  # no reading now
        (1.0, 0.004, "passed"),  # nothing grew: judged as usual
    ],
)
def test_judge_excuses_only_what_the_slowdown_explains(cpu_s, machine_now, judged):
    verdicts, notes = judge({"cpu_s": cpu_s}, PAST, RULE, machine_now)
    cpu = [v for v in verdicts if v.metric == "cpu_s"]
    if judged == "not judged":
        assert cpu == [] and "4.00x slower" in notes[0]
    else:
        assert [v.passed for v in cpu] == [judged == "passed"] and notes == []


def test_runs_recorded_without_a_reading_excuse_nothing():
    past = [{"cpu_s": 1.0 + 0.01 * k} for k in range(9)]  # schema 3 and older
    verdicts, notes = judge({"cpu_s": 3.0}, past, RULE, 0.004)
    assert [v.passed for v in verdicts if v.metric == "cpu_s"] == [False] and notes == []
