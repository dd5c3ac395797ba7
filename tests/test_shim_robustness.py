"""Robustness (issue 3, Must show #6): tests that fork, spawn, start threads and subprocesses, or
free memory the shim never counted run to the same results with and without the profiler, and
the profiled run neither crashes nor hangs."""

from __future__ import annotations

import json
import os
import re

import pytest
from shim_support import QUICK, needs_shim

pytestmark = needs_shim

SUITE = r"""
import ctypes, mmap, multiprocessing as mp, os, subprocess, sys, threading
import numpy as np

MB = 1 << 20


def _work(n):
    a = np.ones(n * MB, dtype=np.uint8)  # over the threshold: samples in a child if armed
    b = [str(i) for i in range(100_000)]
    return int(a.sum()) + len(b)


def _result(name, value):
    print(f"RESULT {name} {value}")


def _child_fork(q):
    q.put(_work(30))


def test_fork():
    ctx = mp.get_context("fork")
    with ctx.Pool(2) as pool:
        _result("fork-pool", pool.map(_work, [20, 30, 40]))
    q = ctx.Queue()
    p = ctx.Process(target=_child_fork, args=(q,))
    p.start()
    _result("fork-process", q.get(timeout=60))
    p.join(60)
    assert p.exitcode == 0
    pid = os.fork()  # a bare fork whose child allocates and copies before exiting
    if pid == 0:
        os._exit(0 if _work(25) == 25 * MB + 100_000 else 1)
    _result("bare-fork", os.waitpid(pid, 0)[1])


def test_spawn():
    with mp.get_context("spawn").Pool(2) as pool:
        _result("spawn-pool", pool.map(_work, [20, 30]))


def test_threads():
    results = [None] * 6
    def run(i):
        results[i] = _work(12 + i)
    threads = [threading.Thread(target=run, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    _result("threads", results)


def test_subprocess():
    code = "import os; print(len(bytes(40 << 20)), os.environ.get('PYTHONMALLOC', '-'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    _result("subprocess", out.stdout.split())


libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.realloc.restype = ctypes.c_void_p
libc.realloc.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
EARLY = [libc.malloc(40 * MB) for _ in range(3)]  # at import: before the profiler armed


def test_foreign_frees():
    for p in EARLY:
        ctypes.memset(p, 1, MB)
        libc.free(p)
    m = mmap.mmap(-1, 64 * MB)  # memory malloc never saw
    m.write(b"x" * MB)
    m.close()
    libc.free(None)
    p = libc.realloc(libc.malloc(16 * MB), 48 * MB)
    libc.free(p)
    _result("foreign", "ok")
"""


def _results(result: pytest.RunResult) -> list[str]:
    # With -s, pytest's progress dots share the line: keep what follows the marker. Only
    # lines that start so: the profile report quotes the source line that prints them.
    found = (re.match(r"\.*(RESULT .*)", line) for line in result.outlines)
    return [match.group(1) for match in found if match]


@pytest.mark.slow
def test_same_results_with_and_without_the_profiler(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_robust=SUITE)
    out = pytester.path / "profile.json"
    common = (*QUICK, "-s", "-q")
    plain = pytester.runpytest_subprocess(*common, timeout=240)
    profiled = pytester.runpytest_subprocess(
        *common, "--profile", "--profile-memory=yes", f"--profile-json={out}", timeout=240
    )
    plain.assert_outcomes(passed=5)
    profiled.assert_outcomes(passed=5)
    assert len(_results(plain)) == 7
    assert _results(profiled) == _results(plain)
    # The profile is there, with memory, for every test: the shim really was active.
    tests = json.loads(out.read_text())["tests"]
    assert len(tests) == 5 and all("peak_mb" in t for t in tests.values())
    assert tests["test_robust.py::test_threads"]["peak_mb"] >= 12
    # Children are not preloaded: the subprocess saw PYTHONMALLOC as it was.
    malloc = os.environ.get("PYTHONMALLOC", "-")
    assert f"RESULT subprocess ['{40 << 20}', '{malloc}']" in _results(profiled)
