"""The plugin's re-exec with the shim preloaded: environment, stdin and capture as they were,
no loop, and clear reasons where it cannot be done."""

from __future__ import annotations

import ctypes.util
import json
import os
import subprocess
import sys

import pytest
from shim_support import QUICK, needs_shim

from pytest_scalene.core import runenv

ENV_SUITE = r"""
import os, subprocess, sys
from pytest_scalene import _native

def test_environment_as_it_was():
    assert _native.shim_loaded()
    print("SEEN", os.environ.get("LD_PRELOAD", "-"), os.environ.get("PYTHONMALLOC", "-"))
    assert not [k for k in os.environ if k.startswith("PYTEST_SCALENE_")]
    code = "from pytest_scalene import _native; print(_native.shim_loaded())"
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert child.stdout.strip() == "False", child.stderr

def test_stdin_reaches_the_test():
    print("STDIN", sys.stdin.readline().strip())

def test_capture_still_works():
    print("CAPTURED-OUTPUT")
    assert False
"""


def _run(pytester: pytest.Pytester, *args: str, stdin: bytes | None = None) -> pytest.RunResult:
    cmd = [sys.executable, "-m", "pytest", *QUICK, *args]
    if stdin is None:
        return pytester.run(*cmd, timeout=120)
    return pytester.run(*cmd, timeout=120, stdin=stdin)


@needs_shim
@pytest.mark.slow
def test_reexec_restores_environment_and_keeps_stdin_and_capture(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_env=ENV_SUITE)
    libm = ctypes.util.find_library("m") or "libm.so.6"
    monkeypatch.setenv("LD_PRELOAD", libm)  # a value of the user's, harmless
    monkeypatch.setenv("PYTHONMALLOC", "pymalloc")
    result = _run(pytester, "--profile", "-s", "-k", "environment or stdin", stdin=b"hello\n")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"*SEEN {libm} pymalloc*", "*STDIN hello*"])
    # Without -s: capture still captures (shown for the failing test only).
    result = _run(pytester, "--profile", "-k", "capture")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*Captured stdout call*", "CAPTURED-OUTPUT"])


@needs_shim
def test_memory_no_does_not_reexec(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        from pytest_scalene import _native
        def test_not_preloaded():
            assert not _native.shim_loaded()
        """
    )
    out = pytester.path / "profile.json"
    result = _run(pytester, "--profile", "--profile-memory=no", f"--profile-json={out}")
    result.assert_outcomes(passed=1)
    test = next(iter(json.loads(out.read_text())["tests"].values()))
    assert "peak_mb" not in test


@needs_shim
@pytest.mark.slow
def test_no_loop_when_the_preload_does_not_take(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As if this run were our re-exec and the shim had failed to load.
    pytester.makepyfile("def test_one():\n    pass\n")
    monkeypatch.setenv(runenv.GUARD, "1")
    result = _run(pytester, "--profile", "--profile-memory=yes")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--profile-memory=yes*re-executed*shim is not active*"])
    out = pytester.path / "profile.json"
    result = _run(pytester, "--profile", f"--profile-json={out}")
    result.assert_outcomes(passed=1)
    notes = json.loads(out.read_text())["notes"]
    assert any("memory, leak and copy columns are absent" in n for n in notes), notes


MAIN_TWICE = """
import json, sys, pytest
for memory in ("preload", "yes"):
    code = pytest.main(["-q", "-p", "no:cacheprovider", "--profile", f"--profile-memory={memory}",
                        f"--profile-json={memory}.json", "test_one.py"])
    print("EXIT", memory, int(code))
"""


def test_pytest_main_profiles_memory_in_process_and_cannot_reexec(pytester: pytest.Pytester):
    """pytest.main() cannot be re-executed: --profile-memory=preload is a usage error there,
    while the default installs the shim in the running process. In a process of its own: a
    test module that loads the shim library (ctypes) would make this one's look preloaded."""
    pytester.makepyfile(test_one="def test_one():\n    assert bytearray(8 << 20)\n")
    script = pytester.path / "main_twice.py"
    script.write_text(MAIN_TWICE)
    done = subprocess.run(
        [sys.executable, str(script)], cwd=pytester.path, capture_output=True, text=True
    )
    assert "EXIT preload 4" in done.stdout, done.stdout + done.stderr  # USAGE_ERROR
    assert "pytest.main()" in done.stderr, done.stderr
    assert "EXIT yes 0" in done.stdout, done.stdout + done.stderr
    tests = json.loads((pytester.path / "yes.json").read_text())["tests"]
    assert tests["test_one.py::test_one"]["peak_mb"] >= 7.5, tests


def test_restore_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(runenv.GUARD, "1")
    monkeypatch.setenv("LD_PRELOAD", "/x/libpytest_scalene_shim.so:libm.so.6")
    monkeypatch.setenv(runenv.ORIGINAL_PREFIX + "LD_PRELOAD", "libm.so.6")
    assert runenv.restore_environment()
    assert os.environ["LD_PRELOAD"] == "libm.so.6"
    assert runenv.ORIGINAL_PREFIX + "LD_PRELOAD" not in os.environ
    assert not runenv.restore_environment()  # only once: the guard is gone
    monkeypatch.setenv(runenv.GUARD, "1")  # the user had no LD_PRELOAD: none is left
    assert runenv.restore_environment() and "LD_PRELOAD" not in os.environ


@needs_shim
@pytest.mark.parametrize("profile", [False, True])
def test_same_process_whether_reexecuted_or_not(pytester: pytest.Pytester, profile: bool) -> None:
    # execve keeps the pid: whoever started pytest waits on the same process. Without
    # --profile nothing changes at all.
    pytester.makepyfile(
        """
        import os
        from pytest_scalene import _native
        def test_pid():
            print("PID", os.getpid(), _native.shim_loaded())
        """
    )
    args = ["-s", "-q", *QUICK, *(["--profile"] if profile else [])]
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", *args],
        cwd=pytester.path,
        stdout=subprocess.PIPE,
        text=True,
    )
    out, _ = proc.communicate(timeout=120)
    assert f"PID {proc.pid} {profile}" in out, out
