"""The profiler's signals and the test's (issue 14): memory samples never reach a test's own
handler for SIGXCPU (they use a free real-time signal), and no profiling signal makes a
blocking C call fail with EINTR (handlers have SA_RESTART)."""

from __future__ import annotations

import json

import pytest
from conftest import line_at
from shim_support import QUICK, needs_shim

pytestmark = [needs_shim, pytest.mark.slow]

SUITE = r"""
import ctypes, os, signal, threading, time

MB = 1 << 20


def test_own_sigxcpu_handler():
    calls = []
    previous = signal.signal(signal.SIGXCPU, lambda s, f: calls.append(s))
    try:
        kept = [bytearray(MB) for _ in range(200)]  # ALLOCATE
        time.sleep(0.05)  # a pending Python handler would run here at the latest
        assert calls == [], f"{len(calls)} calls"
        assert len(kept) == 200
    finally:
        signal.signal(signal.SIGXCPU, previous)


def test_blocking_c_read():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.read.restype = ctypes.c_ssize_t
    libc.read.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
    r, w = os.pipe()
    writer = threading.Thread(target=lambda: (time.sleep(0.8), os.write(w, b"hello")))
    writer.start()
    buf = ctypes.create_string_buffer(16)
    n = libc.read(r, buf, 16)  # one C read(): without SA_RESTART a tick ends it with EINTR
    errno = ctypes.get_errno()
    writer.join()
    os.close(r)
    os.close(w)
    assert n == 5, f"read returned {n}, errno {errno}"
"""


@pytest.mark.parametrize("clock", ["cpu", "wall"])
def test_signals_stay_out_of_the_test(pytester: pytest.Pytester, clock: str) -> None:
    path = pytester.makepyfile(test_sig=SUITE)
    out = pytester.path / "profile.json"
    result = pytester.runpytest_subprocess(
        "--profile", f"--profile-clock={clock}", f"--profile-json={out}", *QUICK, timeout=300
    )
    result.assert_outcomes(passed=2)
    test = json.loads(out.read_text())["tests"]["test_sig.py::test_own_sigxcpu_handler"]
    line = line_at(test, path, "# ALLOCATE")  # and memory was still profiled throughout
    assert line["alloc_mb"] >= 180, line


TAKEN_SUITE = r"""
import signal

MB = 1 << 20
calls = []


def test_leaves_its_handler_on_the_profilers_signal():
    for signum in range(signal.SIGRTMIN, signal.SIGRTMAX + 1):
        if callable(signal.getsignal(signum)):  # the memory sampler's, kept between tests
            signal.signal(signum, lambda s, f: calls.append(s))


def test_next():
    kept = [bytearray(MB) for _ in range(200)]  # NEXT
    assert len(kept) == 200
    assert calls == [], f"{len(calls)} memory samples reached the first test's handler"
"""

AT_EXIT = r"""
import atexit, json, os, signal


def _dispositions():
    found = {}
    for signum in range(signal.SIGRTMIN, signal.SIGRTMAX + 1):
        handler = signal.getsignal(signum)
        if handler != signal.SIG_DFL:
            found[signum] = getattr(handler, "__name__", repr(handler))
    with open(os.environ["DISPOSITIONS"], "w") as out:
        json.dump(found, out)


atexit.register(_dispositions)
"""


def test_the_signal_is_kept_for_the_session_and_taken_again_when_a_test_takes_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    dispositions = pytester.path / "dispositions.json"
    monkeypatch.setenv("DISPOSITIONS", str(dispositions))
    pytester.makeconftest(AT_EXIT)
    path = pytester.makepyfile(test_taken=TAKEN_SUITE)
    out = pytester.path / "profile.json"
    result = pytester.runpytest_subprocess("--profile", f"--profile-json={out}", *QUICK)
    result.assert_outcomes(passed=2)
    test = json.loads(out.read_text())["tests"]["test_taken.py::test_next"]
    assert line_at(test, path, "# NEXT")["alloc_mb"] >= 180  # a free signal was taken again
    # After the session: the first test's handler where it left it, every other one as it was.
    assert list(json.loads(dispositions.read_text()).values()) == ["<lambda>"]
