"""Tests that use signals, timers, faulthandler, asyncio or fork behave the same under --profile.

The sample suite (tests/data/signal_suite.py) records what each test observes; it runs in
pytester subprocesses unprofiled, with --profile (SIGPROF) and with --profile-clock=wall
(SIGALRM), and every observation must match. The report names each signal given up.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import signal
import time
from pathlib import Path

import pytest

from pytest_scalene.sampling import posix_timer
from pytest_scalene.sampling import timers as sampling_timers

SUITE = Path(__file__).parent / "data" / "signal_suite.py"


def _run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, name: str, *args: str):
    """Run the sample suite; return its observations, the JSON profile (or None) and result."""
    out = pytester.path / f"{name}.txt"
    monkeypatch.setenv("SIGNAL_SUITE_OUT", str(out))
    json_path = pytester.path / f"{name}.json"
    extra = [f"--profile-json={json_path}"] if args else []
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, *extra)
    profile = json.loads(json_path.read_text()) if args else None
    return sorted(out.read_text().splitlines()), profile, result


def _given_up(profile: dict) -> dict[str, str]:
    return {
        nodeid.split("::")[1]: test["cpu_sampling_skipped"]
        for nodeid, test in profile["tests"].items()
        if "cpu_sampling_skipped" in test
    }


@pytest.mark.slow
def test_observations_match_unprofiled_and_conflicts_are_named(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_signals=SUITE.read_text())
    plain, _, result = _run(pytester, monkeypatch, "plain")
    result.assert_outcomes(passed=11)
    assert "RESULT asyncio SIGPROF calls 1" in plain  # the observations are the real ones
    assert "RESULT child killed by SIGPROF" in plain
    assert "RESULT faulthandler.register dumps 1" in plain
    assert "RESULT survived unblocking SIGPROF True" in plain

    cpu, cpu_profile, result = _run(pytester, monkeypatch, "cpu", "--profile")
    result.assert_outcomes(passed=11)
    assert cpu == plain
    given_up = _given_up(cpu_profile)
    assert sorted(given_up) == [
        "test_asyncio_handler_on_sigprof",
        "test_faulthandler_register_on_sigprof",
        "test_own_sigprof_timer",
    ]
    assert "faulthandler.register" in given_up["test_faulthandler_register_on_sigprof"]
    assert all("gave up SIGPROF" in reason for reason in given_up.values())
    assert sum("gave up SIGPROF" in note for note in cpu_profile["notes"]) == 3
    # Tests that leave the sampler's signal alone are profiled as usual.
    quiet = cpu_profile["tests"]["test_signals.py::test_sees_no_sampler"]
    assert quiet["cpu_python_s"] + quiet["cpu_native_s"] + quiet["cpu_system_s"] > 0.1

    wall, wall_profile, result = _run(
        pytester, monkeypatch, "wall", "--profile", "--profile-clock=wall"
    )
    result.assert_outcomes(passed=11)
    assert wall == plain
    given_up = _given_up(wall_profile)
    assert sorted(given_up) == ["test_alarm", "test_own_sigalrm_timer"]
    assert all("gave up SIGALRM" in reason for reason in given_up.values())


FALLBACK_CONFTEST = """
import signal
calls = []
def conftest_handler(signum, frame):
    calls.append(signum)
signal.signal(signal.SIGPROF, conftest_handler)
"""

FALLBACK_TESTS = """
import signal, time
import conftest

def test_burn():
    start = time.process_time()
    while time.process_time() - start < 0.6:
        pass

def test_conftest_handler_untouched():
    assert signal.getsignal(signal.SIGPROF) is conftest.conftest_handler
    assert conftest.calls == []  # the sampler's timer never sent it SIGPROF
"""


@pytest.mark.slow
def test_taken_sigprof_falls_back_to_a_posix_timer(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(FALLBACK_CONFTEST)
    pytester.makepyfile(test_fallback=FALLBACK_TESTS)
    json_path = pytester.path / "profile.json"
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--profile", f"--profile-json={json_path}"
    )
    result.assert_outcomes(passed=2)
    profile = json.loads(json_path.read_text())
    notes = " ".join(profile["notes"])
    assert "SIGPROF has a handler (conftest_handler)" in notes
    assert "POSIX timer on SIGRT" in notes
    burn = profile["tests"]["test_fallback.py::test_burn"]
    cpu = burn["cpu_python_s"] + burn["cpu_native_s"] + burn["cpu_system_s"]
    assert 0.4 < cpu < 0.9, cpu  # 0.6 s of CPU, sampled by the fallback timer
    hottest = max(burn["lines"], key=lambda line: line["samples"])
    assert hottest["function"] == "test_burn" and hottest["samples"] >= 20


TIMEOUT_TESTS = """
import time

def test_burn():
    start = time.process_time()
    while time.process_time() - start < 0.3:
        pass

def test_hangs():
    time.sleep(30)
"""


@pytest.mark.slow
def test_pytest_timeout_signal_method_with_wall_clock(pytester: pytest.Pytester) -> None:
    """pytest-timeout holds SIGALRM and ITIMER_REAL around every test: the wall clock sampler
    falls back to a POSIX timer, and the timeout still fires as it does unprofiled."""
    pytest.importorskip("pytest_timeout", reason="pytest-timeout is not installed")
    pytester.makepyfile(test_timeout=TIMEOUT_TESTS)
    args = ["-p", "no:cacheprovider", "--timeout=2", "--timeout-method=signal"]
    plain = pytester.runpytest_subprocess(*args)
    plain.assert_outcomes(passed=1, failed=1)
    json_path = pytester.path / "profile.json"
    profiled = pytester.runpytest_subprocess(
        *args, "--profile", "--profile-clock=wall", f"--profile-json={json_path}"
    )
    profiled.assert_outcomes(passed=1, failed=1)
    profiled.stdout.fnmatch_lines(["*Failed: Timeout (>2.0s)*"])
    profile = json.loads(json_path.read_text())
    assert any("SIGALRM has a handler" in note for note in profile["notes"])
    burn = profile["tests"]["test_timeout.py::test_burn"]
    assert "cpu_sampling_skipped" not in burn
    assert burn["cpu_python_s"] + burn["cpu_native_s"] + burn["cpu_system_s"] > 0.15


# -- the timers themselves (in this process; every handler is put back) ------------------------


def _burn(seconds: float) -> None:
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass


def test_posix_cpu_timer_fires_on_cpu_time() -> None:
    signum = sampling_timers.free_realtime_signal()
    if signum is None or posix_timer.libc is None:
        pytest.skip("no free real-time signal or no timer_create here")
    ticks: list[int] = []
    old = signal.signal(signum, lambda s, f: ticks.append(s))
    timer = posix_timer.PosixTimer(posix_timer.CLOCK_PROCESS_CPUTIME_ID, signum, "test")
    try:
        timer.arm(0.01)
        assert 0 < timer.until_expiry() <= 0.01
        start = time.process_time()
        _burn(0.3)
        used = time.process_time() - start
        timer.disarm()
        assert timer.until_expiry() == 0.0
        count = len(ticks)
        time.sleep(0.05)  # wall time does not move a CPU timer; a disarmed one never fires
        _burn(0.05)
        assert len(ticks) == count
    finally:
        timer.close()
        signal.signal(signum, old)
    assert used / 0.01 * 0.6 <= count <= used / 0.01 * 1.2, (count, used)


def test_c_level_handler_is_seen() -> None:
    """faulthandler.register is invisible to signal.getsignal, not to sigaction."""
    if posix_timer.libc is None:
        pytest.skip("no libc sigaction through ctypes here")
    signum = signal.SIGUSR2
    assert signal.getsignal(signum) == signal.SIG_DFL
    assert sampling_timers.signal_in_use(signum) is None
    faulthandler.register(signum)
    try:
        assert signal.getsignal(signum) == signal.SIG_DFL
        assert "C-level handler" in (sampling_timers.signal_in_use(signum) or "")
    finally:
        faulthandler.unregister(signum)
    assert sampling_timers.signal_in_use(signum) is None


def test_running_interval_timer_is_busy() -> None:
    timer = sampling_timers.IntervalTimer(signal.ITIMER_VIRTUAL, signal.SIGVTALRM)
    assert timer.busy() is None
    old = signal.signal(signal.SIGVTALRM, signal.SIG_IGN)
    signal.setitimer(signal.ITIMER_VIRTUAL, 100.0)
    try:
        assert "interval timer is running" in (timer.busy() or "")
        chosen, reason = sampling_timers.choose("cpu", timer)
        with contextlib.closing(chosen):
            assert isinstance(chosen, posix_timer.PosixTimer)
            assert reason and "sampled with a POSIX timer on SIGRT" in reason
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, old)


BETWEEN_CONFTEST = """
import atexit, faulthandler, json, os, signal, threading, time
from faulthandler import register as register_unwrapped  # bound before any profiled test

import pytest

SEEN = []
atexit.register(lambda: _write(f"after the session {signal.getsignal(signal.SIGPROF)!r} "
                               f"{signal.getitimer(signal.ITIMER_PROF)} {time.sleep.__module__}"))

def _write(line):
    with open(os.environ["BETWEEN_OUT"], "a") as out:
        out.write(line + "\\n")

@pytest.fixture(autouse=True)
def observe(request):
    _write(f"{request.node.name} setup {signal.getsignal(signal.SIGPROF)!r} "
           f"{signal.getitimer(signal.ITIMER_PROF)}")
    yield

@pytest.fixture
def own_handler():
    calls = []
    previous = signal.signal(signal.SIGPROF, lambda *a: calls.append(1))
    _write(f"own_handler replaced {previous!r}")
    yield calls
    signal.signal(signal.SIGPROF, previous)

@pytest.fixture
def dump_file(tmp_path):
    path = tmp_path / "dump.txt"
    with open(path, "w") as out:
        register_unwrapped(signal.SIGPROF, file=out, all_threads=False)
        yield path
        faulthandler.unregister(signal.SIGPROF)
"""

BETWEEN_TESTS = """
import os, signal, time
from conftest import _write

def burn(seconds):
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass

def test_a_burns():
    burn(0.4)

def test_b_own_handler(own_handler):
    signal.setitimer(signal.ITIMER_PROF, 0.005, 0.005)
    burn(0.1)
    signal.setitimer(signal.ITIMER_PROF, 0)
    _write(f"own handler called {bool(own_handler)}")

def test_c_burns_again():
    burn(0.4)

def test_d_faulthandler_bound_before(dump_file):
    os.kill(os.getpid(), signal.SIGPROF)
    burn(0.3)
    dumped = dump_file.read_text()
    _write(f"faulthandler dumped {'Current thread' in dumped or 'Stack' in dumped}")

def test_e_burns_last():
    burn(0.4)
"""


@pytest.mark.slow
def test_between_tests_the_kept_signal_is_invisible_and_given_back_when_touched(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sampler keeps SIGPROF from test to test: fixtures between tests see what they would
    see unprofiled, a fixture that takes the signal (through signal.signal, or a C-level
    handler installed by a function bound before the session) keeps it and the next test is
    still sampled, and after the session the signal and the patched functions are as before."""
    pytester.makeconftest(BETWEEN_CONFTEST)
    pytester.makepyfile(test_between=BETWEEN_TESTS)
    observed = {}
    for name, args in (("plain", ()), ("profiled", ("--profile", "--profile-memory=no"))):
        out = pytester.path / f"{name}.txt"
        monkeypatch.setenv("BETWEEN_OUT", str(out))
        json_path = pytester.path / f"{name}.json"
        result = pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", "-p", "no:randomly", *args, f"--profile-json={json_path}"
        )
        result.assert_outcomes(passed=5)
        observed[name] = out.read_text().splitlines()
    assert "own handler called True" in observed["plain"]
    assert "faulthandler dumped True" in observed["plain"]
    assert any(line.startswith("after the session <Handlers.SIG_DFL") for line in observed["plain"])
    assert observed["profiled"] == observed["plain"]
    tests = json.loads((pytester.path / "profiled.json").read_text())["tests"]
    for name in ("test_a_burns", "test_c_burns_again", "test_e_burns_last"):
        test = tests[f"test_between.py::{name}"]
        cpu = test["cpu_python_s"] + test["cpu_native_s"] + test["cpu_system_s"]
        assert 0.25 < cpu < 0.6, (name, cpu)  # sampled, the signal taken again or a spare one
