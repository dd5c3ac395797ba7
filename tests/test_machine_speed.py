"""The machine's speed beside the stored CPU times (gates/machine_speed.py): saved with the
baseline, timed again through the confirmation rounds, which wait for a machine that runs slower
than at the save; a growth that its slowdown explains is not judged (exit status 7, saying why),
one it does not explain still fails. The probe's readings are set by the test (PROBE_MS), so
that the machine's speed is not left to this machine's phases; the test's own CPU time is real."""

from __future__ import annotations

import json
import signal

import pytest

from pytest_scalene.gates import machine_speed, pipeline
from pytest_scalene.history.recent_runs import machine_then

WORK = """
import os
from pathlib import Path


def spin(n):
    total = 0
    for i in range(n):
        total += i * i % 5
    return total
"""
SUITE = (
    WORK
    + """

def test_work():
    runs = Path("runs.txt")  # a slow phase: the first SLOW_RUNS runs are 6x the work
    done = int(runs.read_text()) if runs.exists() else 0
    runs.write_text(str(done + 1))
    factor = 6.0 if done < int(os.environ.get("SLOW_RUNS", "0")) else 1.0
    spin(int(float(os.environ.get("FACTOR", "1")) * factor * 2_000_000))
"""
)
# The probe reads PROBE_MS, or SLOW_PROBE_MS while the test's slow phase lasts; no pauses.
CONFTEST = """
import os
from pathlib import Path

from pytest_scalene.gates import machine_speed, pipeline


def _probe():
    runs = Path("runs.txt")
    done = int(runs.read_text()) if runs.exists() else 0
    slow = done <= int(os.environ.get("SLOW_RUNS", "0"))
    return float(os.environ["SLOW_PROBE_MS" if slow else "PROBE_MS"]) / 1e3


machine_speed.probe_s = _probe
pipeline.CONFIRM_PAUSES_S = tuple(0.0 for _ in pipeline.CONFIRM_PAUSES_S)
pipeline.MACHINE_PAUSES_S = tuple(0.0 for _ in pipeline.MACHINE_PAUSES_S)
"""
FLAGS = ("-p", "no:cacheprovider", "--profile", "--profile-memory=no")


def _run(pytester: pytest.Pytester, monkeypatch, *args: str, **env: str) -> pytest.RunResult:
    (pytester.path / "runs.txt").unlink(missing_ok=True)
    for name in ("FACTOR", "PROBE_MS", "SLOW_PROBE_MS", "SLOW_RUNS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return pytester.runpytest_subprocess(*FLAGS, *args)


@pytest.fixture
def saved(pytester: pytest.Pytester, monkeypatch) -> pytest.Pytester:
    pytester.makepyfile(test_work=SUITE, conftest=CONFTEST)
    result = _run(pytester, monkeypatch, "--profile-save-baseline", PROBE_MS="1.0")
    result.assert_outcomes(passed=1)
    stored = json.loads((pytester.path / "baselines" / "test_work.py.json").read_text())
    assert stored["tests"]["test_work.py::test_work"]["cpu"]["machine_s"] == 0.001
    return pytester


def test_a_growth_the_machine_explains_is_not_judged(saved, monkeypatch):
    # 6x the work on a machine 6x slower: the gate cannot tell; it says so and the run fails.
    # (Sizes: a test of 0.08-0.12 s here, as fast or slow a phase as this VM's, needs about
    # +160% of growth to fail: docs/baselines.md, rule 1. 4x once passed: saved in a slow
    # phase (0.12 s), its warm re-runs read under the 0.31 s limit and cleared it. 6x stays a
    # suspect from either phase, and within what the 6x machine explains, 1.75 x 6 x baseline.)
    result = _run(saved, monkeypatch, "--profile-compare", FACTOR="6", PROBE_MS="6.0")
    result.assert_outcomes(passed=1)
    assert result.ret == 7
    result.stdout.fnmatch_lines(
        [
            "*CPU time not judged: * vs baseline * (+*%), but the machine runs 6.00x slower than "
            "when the baseline was saved*6.00 ms now, 1.00 ms then*",
            "*1 by the stored CPU times*",
        ]
    )


def test_growth_beyond_the_machine_fails(saved, monkeypatch):
    # The same machine: a regression. A machine 1.25x slower does not explain 8x the work.
    for factor, probe in (("5", "1.0"), ("8", "1.25")):
        result = _run(saved, monkeypatch, "--profile-compare", FACTOR=factor, PROBE_MS=probe)
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines(["*CPU time regressed: * vs baseline *"])
        result.stdout.no_fnmatch_line("*not judged*")


def test_the_confirmation_waits_for_the_machine(saved, monkeypatch):
    # Unchanged code in a slow phase (6x, the probe 6x too) that outlasts the four confirmation
    # rounds (runs 1-5) and ends at the seventh run: judged then, and it passes.
    result = _run(
        saved,
        monkeypatch,
        "--profile-compare",
        "--profile-allow-ungated-cpu",  # a test of ~0.2 s: its limit is above 2x (rule 1)
        PROBE_MS="1.0",
        SLOW_PROBE_MS="6.0",
        SLOW_RUNS="6",
    )
    result.assert_outcomes(passed=1)
    assert result.ret == 0, result.stdout.str()
    assert int((saved.path / "runs.txt").read_text()) == 7


def test_slower_by():
    assert machine_speed.slower_by(0.001, 0.003) == pytest.approx(3.0)
    assert machine_speed.slower_by(0.002, 0.001) == 1.0  # faster now: nothing to excuse
    assert machine_speed.slower_by(0.001, 0.00114) == 1.0  # within the probe's own spread
    assert machine_speed.slower_by(None, 0.003) == 1.0  # a baseline saved without the probe
    # The process clock's tick, read until 2026-11-28: 0.0, or a part of a tick. No speed.
    assert machine_speed.slower_by(0.0, 0.003) == machine_speed.slower_by(0.00002, 0.003) == 1.0
    past = [{"machine_s": 0.0}, {"machine_s": 0.00002}, {"machine_s": 0.001}, {}]
    assert machine_then(past) == 0.001  # the history's runs recorded then: left out
    assert machine_speed.probe_s() > 0


def test_the_probe_reads_while_a_cpu_timer_is_armed():
    # The sampler's CPU-time timer makes the process's clock advance at the kernel's ticks only:
    # read on it, ~1 ms of probe work read 0.0 (or a whole tick).
    previous = signal.signal(signal.SIGPROF, lambda signum, frame: None)
    signal.setitimer(signal.ITIMER_PROF, 0.01, 0.01)
    try:
        readings = [machine_speed.probe_s() for _ in range(5)]
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        signal.signal(signal.SIGPROF, previous)
    assert all(reading > 0 for reading in readings), readings


def test_a_saved_baseline_keeps_the_real_probe(pytester: pytest.Pytester):
    # No probe set by the test: the one timed beside the profiled runs, as a user saves it.
    pytester.makepyfile(test_work=SUITE)
    result = pytester.runpytest_subprocess(*FLAGS, "--profile-save-baseline", "--profile-repeat=4")
    result.assert_outcomes(passed=1)
    stored = json.loads((pytester.path / "baselines" / "test_work.py.json").read_text())
    assert 0 < stored["tests"]["test_work.py::test_work"]["cpu"]["machine_s"] < 0.1


TWO_TESTS = (
    WORK
    + """

def run(name):
    runs = Path(name + ".txt")
    runs.write_text(str(int(runs.read_text()) + 1 if runs.exists() else 1))
    spin(int(float(os.environ.get("FACTOR", "1")) * 2_000_000))


def test_a():
    run("a")


def test_b():
    run("b")
"""
)


def test_a_machine_found_slow_is_not_waited_for_again_test_by_test(pytester, monkeypatch):
    # Both tests 6x the work on a machine 6x slower throughout: the first waits through the
    # machine's rounds (1 run + 4 confirmation rounds + 5 more), the second, confirmed right
    # after, does not wait again (1 + 4); both are not judged, saying why.
    pytester.makepyfile(test_work=TWO_TESTS, conftest=CONFTEST)
    fast, slow = (
        {"PROBE_MS": "1.0", "SLOW_PROBE_MS": "1.0"},
        {"PROBE_MS": "6.0", "SLOW_PROBE_MS": "6.0"},
    )
    result = _run(pytester, monkeypatch, "--profile-save-baseline", **fast)
    result.assert_outcomes(passed=2)
    for name in ("a", "b"):
        (pytester.path / f"{name}.txt").unlink()
    result = _run(pytester, monkeypatch, "--profile-compare", FACTOR="6", **slow)
    result.assert_outcomes(passed=2)
    assert result.ret == 7
    runs = [int((pytester.path / f"{name}.txt").read_text()) for name in ("a", "b")]
    assert runs == [10, 5]
    said = " ".join(result.stdout.str().split())
    assert said.count("but the machine runs 6.00x slower than when the baseline was saved") == 2


def test_a_new_session_in_the_same_process_waits_for_the_machine_afresh(pytester, monkeypatch):
    # pytest.main() run again within the minute (an IDE's runner, a script): its first suspect
    # waits through the machine's rounds, as the first session's did (a memory kept by the
    # process made it 5 runs). The conftest's patches of the modules are undone after the test.
    monkeypatch.setattr(machine_speed, "probe_s", machine_speed.probe_s)
    monkeypatch.setattr(pipeline, "CONFIRM_PAUSES_S", pipeline.CONFIRM_PAUSES_S)
    monkeypatch.setattr(pipeline, "MACHINE_PAUSES_S", pipeline.MACHINE_PAUSES_S)
    pytester.makepyfile(test_work=TWO_TESTS, conftest=CONFTEST)
    fast = {"PROBE_MS": "1.0", "SLOW_PROBE_MS": "1.0"}
    _run(pytester, monkeypatch, "--profile-save-baseline", **fast).assert_outcomes(passed=2)
    for name, value in {"FACTOR": "6", "PROBE_MS": "6.0", "SLOW_PROBE_MS": "6.0"}.items():
        monkeypatch.setenv(name, value)
    for _ in range(2):
        for name in ("a", "b"):
            (pytester.path / f"{name}.txt").unlink(missing_ok=True)
        result = pytester.runpytest_inprocess(*FLAGS, "--profile-compare")
        assert result.ret == 7
        runs = [int((pytester.path / f"{name}.txt").read_text()) for name in ("a", "b")]
        assert runs == [10, 5]
