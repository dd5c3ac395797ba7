"""--profile-subprocesses: Python children (subprocess, multiprocessing fork and spawn) profile
themselves and their lines are charged to the test that started them; without the flag they
run as unprofiled children do (no agent, no timer, no inherited handler, no added environment).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from shim_support import needs_shim

from pytest_scalene.core.model import LineKey, TestProfile
from pytest_scalene.subprocesses import child_agent
from pytest_scalene.subprocesses.child_profiles import SITE_DIR, _EnvEntry, merge_child

QUICK = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest")

# The child's work and a report of its state, written to $STATE_DIR.
CHILD = """
import json, os, signal, sys, time
from pathlib import Path

def loop(seconds=0.5):
    end = time.process_time() + seconds
    n = 0
    while time.process_time() < end:
        for _ in range(20_000):
            n += 1
    return n

def _handler(signum):
    handler = signal.getsignal(signum)
    return "default" if handler == signal.SIG_DFL else repr(handler)

def report(tag):
    agent = sys.modules.get("pytest_scalene.subprocesses.child_agent")
    state = {
        "env": {k: os.environ.get(k) for k in ("LD_PRELOAD", "PYTHONPATH", "PYTEST_SCALENE_CHILD")},
        "itimers": [list(signal.getitimer(t)) for t in (signal.ITIMER_PROF, signal.ITIMER_REAL)],
        "handlers": {s.name: _handler(s) for s in
                     (signal.SIGPROF, signal.SIGALRM, signal.SIGXCPU, signal.SIGTERM)},
        "agent": bool(agent is not None and agent._agent is not None),
    }
    Path(os.environ["STATE_DIR"], f"{tag}-{os.getpid()}.json").write_text(json.dumps(state))

def run(tag, seconds=0.5):
    loop(seconds)
    report(tag)

if __name__ == "__main__":
    run(sys.argv[1], float(sys.argv[2]))
    if sys.argv[3:] == ["kill"]:
        os.kill(os.getpid(), signal.SIGKILL)
    if sys.argv[3:] == ["_exit"]:
        os._exit(3)
"""

SUITE = """
import multiprocessing as mp
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import child

CHILD = str(Path(child.__file__))

def python(*args, env=None):
    return subprocess.run([sys.executable, CHILD, *args], env=env).returncode

def test_subprocess():
    assert python("subprocess", "0.5") == 0

def test_fork():
    p = mp.get_context("fork").Process(target=child.run, args=("fork",))
    p.start(); p.join()
    assert p.exitcode == 0

def test_spawn():
    p = mp.get_context("spawn").Process(target=child.run, args=("spawn",))
    p.start(); p.join()
    assert p.exitcode == 0

def test_pool_terminated():
    with mp.get_context("fork").Pool(2) as pool:  # __exit__: terminate() (SIGTERM)
        pool.starmap(child.run, [("pool", 0.2)] * 2)

def test_child_killed():
    assert python("killed", "0.2", "kill") == -signal.SIGKILL

def test_child_os_exit():
    assert python("os_exit", "0.2", "_exit") == 3

def test_existing_sitecustomize(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(
        "import os, pathlib\\n"
        "pathlib.Path(os.environ['STATE_DIR'], 'chained').write_text('ran')\\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [env.get("PYTHONPATH"), str(tmp_path)]))
    assert python("chained", "0.2", env=env) == 0
"""

CONFTEST = """
import os
import pytest

WATCHED = ("LD_PRELOAD", "PYTHONPATH", "PYTEST_SCALENE_CHILD")

@pytest.fixture(autouse=True)
def environment_restored():
    before = {k: os.environ.get(k) for k in WATCHED}
    yield
    assert {k: os.environ.get(k) for k in WATCHED} == before
"""


def _run_suite(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *args: str
) -> tuple[dict, dict[str, list[dict]]]:
    """Run SUITE under --profile and `args`; return the JSON and the children's state reports
    by tag."""
    pytester.makepyfile(child=CHILD, test_children=SUITE, conftest=CONFTEST)
    state_dir = pytester.mkdir("state")
    out = pytester.path / "profile.json"
    monkeypatch.setenv("STATE_DIR", str(state_dir))
    result = pytester.runpytest_subprocess(
        "--profile", f"--profile-json={out}", *args, *QUICK, timeout=300
    )
    result.assert_outcomes(passed=7)
    states: dict[str, list[dict]] = {}
    for path in sorted(state_dir.glob("*-*.json")):
        states.setdefault(path.name.split("-")[0], []).append(json.loads(path.read_text()))
    chained = (state_dir / "chained").exists()
    return {"profile": json.loads(out.read_text()), "chained": chained}, states


def _test(profile: dict, name: str) -> dict:
    return profile["tests"][f"test_children.py::test_{name}"]


def _child_python_s(test: dict) -> float:
    return sum(ln["cpu_python_s"] for ln in test["lines"] if ln["file"] == "child.py")


@pytest.mark.slow
def test_children_profiled_with_the_flag(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    found, states = _run_suite(pytester, monkeypatch, "--profile-subprocesses")
    profile = found["profile"]
    for name in ("subprocess", "fork", "spawn"):
        test = _test(profile, name)
        child_lines = [ln for ln in test["lines"] if ln["file"] == "child.py"]
        # The loop has the child's time; its start-up imports may catch a sample or two.
        in_loop = sum(ln["cpu_python_s"] for ln in child_lines if ln["function"] == "loop")
        assert in_loop >= 0.9 * _child_python_s(test), (name, child_lines)
        assert _child_python_s(test) >= 0.3, (name, child_lines)  # a 0.5 s CPU loop
        assert test["children"] == 1, name
        assert test["cpu_python_s"] >= _child_python_s(test)  # totals include the children
        assert test["children_cpu_s"] >= 0.4, name
        # Charged once: the loop line has the child's 0.5 s, the parent (which waited) little.
        assert _child_python_s(test) <= 0.6, name
        own = test["cpu_python_s"] + test["cpu_native_s"] + test["cpu_system_s"]
        assert own - test["children_cpu_s"] < 0.25, name
        assert [s["agent"] for s in states[name]] == [True], name
    pool = _test(profile, "pool_terminated")
    assert pool["children"] == 2  # both workers reported, though terminated by SIGTERM
    assert _child_python_s(pool) >= 0.15
    killed = _test(profile, "child_killed")
    assert killed["children_lost"] == 1 and "children" not in killed
    assert any("1 child process(es) had not reported" in n for n in profile["notes"])
    os_exit = _test(profile, "child_os_exit")
    assert os_exit["children"] == 1 and _child_python_s(os_exit) >= 0.1
    chained = _test(profile, "existing_sitecustomize")
    assert found["chained"], "the test's own sitecustomize must still run"
    assert chained["children"] == 1 and _child_python_s(chained) >= 0.1


@pytest.mark.slow
def test_children_untouched_without_the_flag(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    found, states = _run_suite(pytester, monkeypatch)
    profile = found["profile"]
    assert found["chained"]
    for name, test in profile["tests"].items():
        assert not [ln for ln in test["lines"] if ln["file"] == "child.py"], name
        assert not any(key.startswith("children") for key in test), name
    assert set(states) == {"subprocess", "fork", "spawn", "pool", "killed", "os_exit", "chained"}
    for tag, reports in states.items():
        for state in reports:
            assert state["agent"] is False, tag
            assert state["env"]["PYTEST_SCALENE_CHILD"] is None, tag
            assert SITE_DIR not in (state["env"]["PYTHONPATH"] or ""), tag
            assert "pytest_scalene" not in (state["env"]["LD_PRELOAD"] or ""), tag
            assert state["itimers"] == [[0.0, 0.0], [0.0, 0.0]], tag  # no sampling timer
            assert set(state["handlers"].values()) == {"default"}, (tag, state)


@pytest.mark.slow
def test_nested_pytest_profiles_itself(pytester: pytest.Pytester) -> None:
    """A profiled test that runs pytest --profile in a child (as pytester does): the inner
    session profiles itself; the outer test is not charged with it and both pass."""
    pytester.makepyfile(
        test_inner="""
        def test_inner():
            assert sum(i * i for i in range(2_000_000))
        """,
        test_outer="""
        import json, subprocess, sys
        from pathlib import Path

        def test_outer(tmp_path):
            inner = Path(__file__).with_name("test_inner.py")
            out = tmp_path / "inner.json"
            result = subprocess.run([sys.executable, "-m", "pytest", str(inner), "--profile",
                                     f"--profile-json={out}", "-p", "no:cacheprovider"])
            assert result.returncode == 0
            assert json.loads(out.read_text())["tests"]["test_inner.py::test_inner"]["lines"]
        """,
    )
    out = pytester.path / "outer.json"
    result = pytester.runpytest_subprocess(
        "test_outer.py", "--profile", "--profile-subprocesses", f"--profile-json={out}", *QUICK
    )
    result.assert_outcomes(passed=1)
    outer = json.loads(out.read_text())["tests"]["test_outer.py::test_outer"]
    assert "children_lost" not in outer
    assert not [ln for ln in outer["lines"] if ln["file"] == "test_inner.py"]


def test_merge_charges_lines_and_counts_children() -> None:
    key = LineKey("child.py", 6, "loop")
    test = TestProfile("t", cpu_python_s=1.0)
    test.line(key, 3).extra.update(peak_mb=10.0, alloc_mb=2.0, timeline=[[0, 1]])
    child = TestProfile("c", cpu_python_s=0.5, cpu_native_s=0.25, extra={"peak_mb": 7.0})
    stats = child.line(key, 3)
    stats.cpu_python_s, stats.samples = 0.5, 50
    stats.extra.update(peak_mb=4.0, alloc_mb=3.0, timeline=[[0, 9]], copy_mb_s=1.0)
    merge_child(test, child)
    merge_child(test, TestProfile("d", cpu_system_s=0.1))
    merged = test.lines[key]
    assert (merged.cpu_python_s, merged.samples) == (0.5, 50)
    assert merged.extra == {
        "peak_mb": 10.0,
        "alloc_mb": 5.0,
        "timeline": [[0, 1]],
        "copy_mb_s": 1.0,
    }
    assert test.cpu_s == pytest.approx(1.85)
    assert test.extra == {
        "children": 2,
        "children_cpu_s": pytest.approx(0.85),
        "children_peak_mb": 7.0,
    }


def test_env_entry_restores_and_keeps_a_test_own_change(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTHONPATH", raising=False)
    entry = _EnvEntry("PYTHONPATH", "/ours", os.pathsep)
    entry.apply()
    assert os.environ["PYTHONPATH"] == "/ours"
    entry.undo()
    assert "PYTHONPATH" not in os.environ
    monkeypatch.setenv("PYTHONPATH", "/theirs")
    entry.apply()
    assert os.environ["PYTHONPATH"] == f"/ours{os.pathsep}/theirs"
    os.environ["PYTHONPATH"] += f"{os.pathsep}/added-by-the-test"
    entry.undo()
    assert os.environ["PYTHONPATH"] == f"/theirs{os.pathsep}/added-by-the-test"


def test_settings_round_trip_through_the_environment() -> None:
    settings = child_agent.ChildSettings("/spool", "/root", 0.01, "wall", ("a*",), (), 123)
    assert child_agent.ChildSettings.from_env(settings.to_env()) == settings


def test_bootstrap_is_inert_without_settings(tmp_path: Path) -> None:
    """The sitecustomize does nothing (and imports nothing of ours) unless a test set it up."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != child_agent.ENV}
    env["PYTHONPATH"] = SITE_DIR
    code = "import sys; print(any(m.startswith('pytest_scalene') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr


@needs_shim
@pytest.mark.slow
def test_children_memory_is_charged_to_their_lines(pytester: pytest.Pytester) -> None:
    """With the shim preloaded, children are preloaded too: a child's 200 MB allocation is on
    its line, the test's own peak is not."""
    pytester.makepyfile(
        big="""
        def allocate():
            block = bytearray(200 * 2**20)
            return len(block)

        if __name__ == "__main__":
            allocate()
        """,
        test_memory="""
        import multiprocessing as mp, subprocess, sys
        import big

        def test_subprocess():
            subprocess.run([sys.executable, big.__file__], check=True)

        def test_fork():
            p = mp.get_context("fork").Process(target=big.allocate)
            p.start(); p.join()
            assert p.exitcode == 0
        """,
    )
    out = pytester.path / "profile.json"
    result = pytester.runpytest_subprocess(
        "--profile", "--profile-subprocesses", f"--profile-json={out}", *QUICK, timeout=300
    )
    result.assert_outcomes(passed=2)
    for name, test in json.loads(out.read_text())["tests"].items():
        line = next(ln for ln in test["lines"] if ln["file"] == "big.py" and ln["line"] == 2)
        assert 195 <= line["peak_mb"] <= 215, (name, line)
        assert 195 <= test["children_peak_mb"] <= 215, name
        assert test["peak_mb"] < 20, name  # the parent's own footprint


@pytest.mark.slow
def test_a_child_that_claims_the_sampler_signal_keeps_it(pytester: pytest.Pytester) -> None:
    """A child installing its own SIGPROF handler (and no timer) must never see a sample tick:
    the child's sampler steps aside, as around a test, and says so."""
    pytester.makepyfile(
        claimer="""
        import signal, sys, time

        calls = []
        signal.signal(signal.SIGPROF, lambda *args: calls.append(1))
        end = time.process_time() + 0.3
        while time.process_time() < end:
            sum(range(10_000))
        sys.exit(len(calls))
        """,
        test_claim="""
        import subprocess, sys
        from pathlib import Path

        def test_claim():
            claimer = Path(__file__).with_name("claimer.py")
            assert subprocess.run([sys.executable, str(claimer)]).returncode == 0
        """,
    )
    out = pytester.path / "profile.json"
    result = pytester.runpytest_subprocess(
        "--profile", "--profile-subprocesses", f"--profile-json={out}", *QUICK
    )
    result.assert_outcomes(passed=1)
    profile = json.loads(out.read_text())
    assert profile["tests"]["test_claim.py::test_claim"]["children"] == 1
    assert any("a child process: it took SIGPROF" in note for note in profile["notes"])
