"""--profile-history end to end: runs recorded by real pytest sessions (xdist: once, by the
controller), the ini key, unusable stores stopping the run before any test, and
--profile-compare-history failing a test that slowed down against its recent runs."""

from __future__ import annotations

import json
import sqlite3

import pytest

from pytest_scalene.history import schema
from pytest_scalene.history.connect import open_store
from pytest_scalene.history.run_records import RunRecord, fingerprint, machine_info

SUITE = """
import os

SCALE = int(os.environ.get("SCALE", "1"))


def crunch(n):
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def test_crunch():
    assert crunch(SCALE * 300_000) >= 0


def test_other():
    assert crunch(50_000) >= 0
"""


@pytest.fixture(autouse=True)
def scale(monkeypatch):
    monkeypatch.setenv("SCALE", "30")  # test_crunch: ~0.3 s of CPU, well above the 0.05 s floor


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "--profile-memory=no", *args)


def test_each_run_is_recorded_with_its_figures_commit_and_machine(pytester):
    pytester.makepyfile(test_mod=SUITE)
    db = pytester.path / "h.db"
    for _ in range(2):
        result = run(pytester, "--profile", f"--profile-history={db}")
        result.assert_outcomes(passed=2)
        result.stdout.fnmatch_lines(["history: run * recorded in *h.db: 2 tests, *"])
    with open_store(str(db)) as store:
        runs = store.runs()
        assert len(runs) == 2 and runs[0].machine == fingerprint(machine_info())
        series = store.series(runs)
        assert sorted(series) == ["test_mod.py::test_crunch", "test_mod.py::test_other"]
        crunch = series["test_mod.py::test_crunch"]
        assert all(p.outcome == "passed" and p.metrics["cpu_s"] > 0 for p in crunch)
        lines = store.line_series("test_mod.py::test_crunch", runs)
        assert any(key[2] == "crunch" for key in lines)
        (options,) = {r[0] for r in store._execute("SELECT options FROM scalene_runs")}
    assert json.loads(options)["interval_s"] == 0.01


def test_the_ini_key_names_the_store_and_xdist_records_one_run(pytester):
    pytest.importorskip("xdist")
    pytester.makepyfile(test_mod=SUITE)
    pytester.makeini("[pytest]\nprofile_history = sqlite:///hist/h.db\n")
    result = run(pytester, "--profile", "-n", "2")
    result.assert_outcomes(passed=2)
    with open_store(str(pytester.path / "hist" / "h.db")) as store:
        (only,) = store.runs()
        assert only.test_count == 2 and len(store.series([only])) == 2


def test_an_unusable_store_stops_the_run_before_any_test(pytester):
    pytester.makepyfile(test_mod=SUITE)
    (pytester.path / "h.db").write_bytes(b"garbage" * 1000)
    result = run(pytester, "--profile", "--profile-history=h.db")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--profile-history: h.db: not a usable pytest-scalene history*"])
    assert "Traceback" not in result.stderr.str() and "test_crunch" not in result.stdout.str()


def test_an_interrupted_session_is_not_recorded(pytester):
    pytester.makepyfile(
        test_mod=SUITE + "\n\ndef test_zz_interrupt():\n    raise KeyboardInterrupt\n"
    )
    db = pytester.path / "h.db"
    result = run(pytester, "--profile", f"--profile-history={db}")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["history: run not recorded (exit status *INTERRUPTED*)"])
    with open_store(str(db)) as store:
        assert store.runs() == []


def test_history_compare_needs_a_store(pytester):
    pytester.makepyfile(test_mod=SUITE)
    result = run(pytester, "--profile-compare-history")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--profile-compare-history needs a history store*"])


def _copies(db, count: int, cpu_s: float) -> None:
    """`count` more runs like the recorded one, with test_crunch's CPU time set to `cpu_s`."""
    with open_store(str(db)) as store:
        (run,) = store.runs()
        options = json.loads(store._execute("SELECT options FROM scalene_runs")[0][0])
        info = json.loads(store._execute("SELECT machine_info FROM scalene_runs")[0][0])
        assert schema.options_key(options) == run.options_key
        from pytest_scalene.history.run_records import TestRecord

        for k in range(count):
            tests = tuple(
                TestRecord(name, "passed", {"cpu_s": cpu_s * (1 + 0.01 * k)}, [], ())
                for name in ("test_mod.py::test_crunch", "test_mod.py::test_other")
            )
            record = RunRecord(
                f"copy{k}", 1.0 + k, "c", "main", False, run.machine, info, options, tests
            )
            store.record(record)


@pytest.mark.slow
def test_history_compare_fails_a_test_far_above_its_recent_runs(pytester):
    pytester.makepyfile(test_mod=SUITE)
    db = pytester.path / "h.db"
    run(pytester, "--profile", f"--profile-history={db}").assert_outcomes(passed=2)
    _copies(db, 8, cpu_s=0.005)  # far below what crunch costs: it "regressed"
    result = run(pytester, "--profile-compare-history", f"--profile-history={db}", "-rf")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["CPU time regressed against history: * vs median * of the last 9 runs on this *"]
    )
    # test_other's runs read 5 ms: a doubling stays under the floor, and the run says so.
    result.stdout.fnmatch_lines(
        ["CPU: the history could not have caught a 2x slowdown in 1 of 2 compared tests*"]
    )


@pytest.mark.slow
def test_history_compare_passes_a_test_within_its_recent_runs(pytester):
    pytester.makepyfile(test_mod=SUITE)
    db = pytester.path / "h.db"
    run(pytester, "--profile", f"--profile-history={db}").assert_outcomes(passed=2)
    _copies(db, 8, cpu_s=5.0)  # far above: nothing can regress
    out = pytester.path / "p.json"
    result = run(
        pytester, "--profile-compare-history", f"--profile-history={db}", f"--profile-json={out}"
    )
    result.assert_outcomes(passed=2)
    test = json.loads(out.read_text())["tests"]["test_mod.py::test_crunch"]
    (verdict,) = [v for v in test["verdicts"] if v["metric"] == "cpu_s"]
    assert verdict["metric"] == "cpu_s" and verdict["passed"] and verdict["baseline"] > 4
    assert test["history"]["runs"] == 9 and test["history"]["machine"]
    assert test["history"]["cpu_gated"] and test["history"]["cpu_fails_above_s"] > 5
    assert "could not have caught" not in result.stdout.str()  # 5 s runs: a doubling fails
    with sqlite3.connect(db) as conn:  # the judged run was recorded too, with its verdicts
        assert conn.execute("SELECT COUNT(*) FROM scalene_runs").fetchone()[0] == 10
        gates, stored = conn.execute(
            "SELECT r.gates, r.verdicts FROM scalene_results r JOIN scalene_test_names n "
            "ON n.id = r.test_id WHERE n.nodeid = 'test_mod.py::test_crunch' "
            "ORDER BY r.run_id DESC LIMIT 1"
        ).fetchone()
    assert gates == "passed" and json.loads(stored) == test["verdicts"]


@pytest.mark.slow
def test_history_confirmation_reruns_leave_the_subtest_count_unchanged(pytester):
    # test_crunch reads as a regression after every confirmation round: 4 quiet re-runs.
    suite = SUITE.replace(
        "def test_crunch():\n",
        "def test_crunch(subtests):\n    for i in range(3):\n        with subtests.test(i=i):\n"
        "            assert i >= 0\n",
    )
    pytester.makepyfile(test_mod=suite)
    db = pytester.path / "h.db"
    run(pytester, "-v", "--profile", f"--profile-history={db}").stdout.fnmatch_lines(
        ["*2 passed, 3 subtests passed in *"]
    )
    _copies(db, 8, cpu_s=0.005)
    result = run(pytester, "-v", "--profile-compare-history", f"--profile-history={db}")
    result.stdout.fnmatch_lines(["*1 failed, 1 passed, 3 subtests passed in *"])
