"""A test that crashes the process (segfault, os._exit, a kill, pytest-timeout's thread method)
loses only itself: the JSON profile holds every test before it, whole, and the exit status is
the one pytest has without --profile (also through the memory shim's re-exec)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from shim_support import SHIM

from pytest_scalene.core.codec import session_to_dict
from pytest_scalene.core.model import LineKey, SessionProfile, TestProfile
from pytest_scalene.reports import json_report

CRASHING_SUITE = """
import ctypes, os, signal, time

def test_1_first():
    start = time.process_time()
    while time.process_time() - start < 0.5:
        pass

def test_2_crash():
    kind = os.environ["CRASH_KIND"]
    if kind == "segfault":
        ctypes.string_at(0)
    elif kind == "exit":
        os._exit(3)
    elif kind == "kill":
        os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(30)  # "hang": until pytest-timeout's thread method ends the process

def test_3_after():
    pass
"""

CASES = {  # kind: (extra arguments, exit status)
    "segfault": ((), -signal.SIGSEGV),
    "exit": ((), 3),
    "kill": ((), -signal.SIGTERM),
    "hang": (("--timeout=2", "--timeout-method=thread"), 1),
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(CASES))
def test_crash_loses_only_the_crashing_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    args, status = CASES[kind]
    if kind == "hang":
        pytest.importorskip("pytest_timeout", reason="pytest-timeout is not installed")
    monkeypatch.setenv("CRASH_KIND", kind)
    pytester.makepyfile(test_crash=CRASHING_SUITE)
    quick = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest")
    plain = pytester.runpytest_subprocess(*quick, *args, timeout=120)
    assert plain.ret == status
    out = pytester.path / "out" / "profile.json"
    profiled = pytester.runpytest_subprocess(
        *quick, *args, "--profile", f"--profile-json={out}", timeout=120
    )
    assert profiled.ret == status  # as pytest itself ends, re-executed or not

    profile = json.loads(out.read_text())  # whole: it parses
    assert sorted(profile["tests"]) == ["test_crash.py::test_1_first"]
    first = profile["tests"]["test_crash.py::test_1_first"]
    assert first["outcome"] == "passed"
    assert first["cpu_python_s"] + first["cpu_native_s"] + first["cpu_system_s"] > 0.3
    assert any(
        note.startswith("unfinished") and "test_crash.py::test_2_crash" in note
        for note in profile["notes"]
    )
    assert [p.name for p in out.parent.iterdir()] == ["profile.json"]  # no temporary left
    if SHIM is not None and SHIM.is_file():  # the run went through the shim's re-exec
        assert "peak_mb" in first


def test_a_finished_session_has_no_unfinished_note(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_ok="def test_a():\n    pass\n\ndef test_b():\n    pass\n")
    out = pytester.path / "profile.json"
    result = pytester.runpytest("-p", "no:cacheprovider", "--profile", f"--profile-json={out}")
    result.assert_outcomes(passed=2)
    profile = json.loads(out.read_text())
    assert sorted(profile["tests"]) == ["test_ok.py::test_a", "test_ok.py::test_b"]
    assert not any(note.startswith("unfinished") for note in profile["notes"])


def _session() -> SessionProfile:
    session = SessionProfile(interval_s=0.01, clock="cpu", notes=["a note"])
    for index in range(3):
        profile = TestProfile(f"t.py::test_{index}", outcome="passed", cpu_python_s=0.25 * index)
        stats = profile.line(LineKey("t.py", 3 + index, f"test_{index}"), 2)
        stats.cpu_python_s, stats.samples = 0.125, 12
        stats.extra["peak_mb"] = 1.5
        session.tests[profile.nodeid] = profile
    return session


def test_checkpoint_is_the_final_json_plus_a_note(tmp_path: Path) -> None:
    session = _session()
    checkpoint = json_report.JsonCheckpoint(session, tmp_path / "p.json")
    checkpoint.pytest_runtest_logfinish("t.py::test_0")  # cached; the others are serialised
    session.tests["t.py::test_0"].extra["late"] = 1  # a cached text follows a new profile only
    checkpoint.write("t.py::test_3")
    written = json.loads((tmp_path / "p.json").read_text())
    expected = session_to_dict(session)
    expected["tests"]["t.py::test_0"].pop("late")
    expected["notes"].append(json_report.UNFINISHED.format(nodeid="t.py::test_3"))
    assert written == expected
    assert session.notes == ["a note"]  # the session itself is not changed


def test_checkpoints_stay_within_their_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = iter(range(1000))
    monkeypatch.setattr(json_report.time, "perf_counter", lambda: float(next(clock)))
    checkpoint = json_report.JsonCheckpoint(_session(), tmp_path / "p.json")
    for index in range(40):  # each write "takes" 1 s of the fake clock; tests take none
        checkpoint.write(f"t.py::test_{index}")
    assert checkpoint.written >= 1  # the first one always
    assert checkpoint._spent <= json_report.BUDGET * (next(clock) - 0) + 1
    assert checkpoint.skipped > 30


def test_unwritable_checkpoint_never_raises(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    checkpoint = json_report.JsonCheckpoint(_session(), blocker / "p.json")
    checkpoint.write("t.py::test_0")
    assert checkpoint.failed is not None and "Error" in checkpoint.failed
    checkpoint.write("t.py::test_1")  # stays off, quietly


@pytest.mark.parametrize("durable", [True, False])
def test_atomic_write_replaces_whole_files_only(tmp_path: Path, durable: bool) -> None:
    from pytest_scalene.core.atomic_write import write_text_atomic

    target = tmp_path / "p.json"
    write_text_atomic(target, "first", durable=durable)
    write_text_atomic(target, "second", durable=durable)  # over an existing file: swapped in
    assert target.read_text() == "second"
    assert [p.name for p in tmp_path.iterdir()] == ["p.json"]
    # A directory is never swapped away, a symlink is replaced and its target left alone.
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "kept").write_text("kept")
    with pytest.raises(OSError):
        write_text_atomic(folder, "x", durable=durable)
    assert (folder / "kept").read_text() == "kept"
    link = tmp_path / "link.json"
    link.symlink_to(target)
    write_text_atomic(link, "third", durable=durable)
    assert not link.is_symlink() and link.read_text() == "third"
    assert target.read_text() == "second"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder", "link.json", "p.json"]


@pytest.mark.slow
def test_crashed_xdist_worker_loses_only_its_running_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker's profiles come with its reports: the tests it ran before crashing are kept."""
    pytest.importorskip("xdist", reason="pytest-xdist is not installed")
    monkeypatch.setenv("CRASH_KIND", "segfault")
    pytester.makepyfile(test_crash=CRASHING_SUITE)
    quick = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-n", "1")
    plain = pytester.runpytest_subprocess(*quick, timeout=120)
    plain.assert_outcomes(passed=2, failed=1)  # xdist replaces the crashed worker
    out = pytester.path / "profile.json"
    profiled = pytester.runpytest_subprocess(
        *quick, "--profile", f"--profile-json={out}", timeout=120
    )
    profiled.assert_outcomes(passed=2, failed=1)
    assert profiled.ret == plain.ret
    tests = json.loads(out.read_text())["tests"]
    assert sorted(tests) == ["test_crash.py::test_1_first", "test_crash.py::test_3_after"]
    first = tests["test_crash.py::test_1_first"]
    assert first["outcome"] == "passed"
    assert first["cpu_python_s"] + first["cpu_native_s"] + first["cpu_system_s"] > 0.3
