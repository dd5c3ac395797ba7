"""Another allocator preloaded by the user (issue 14): jemalloc, tcmalloc and mimalloc. The shim
forwards to the allocator after it, never calling an allocator function unqualified: the suite
passes as it does unprofiled, and memory is profiled through that allocator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import line_at
from shim_support import QUICK, needs_shim, outside_xdist

pytestmark = [needs_shim, pytest.mark.slow]

LIBDIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib")
ALLOCATORS = {
    "jemalloc": "libjemalloc.so.2",  # Debian: libjemalloc2
    "tcmalloc": "libtcmalloc_minimal.so.4",  # Debian: libtcmalloc-minimal4
    "mimalloc": "libmimalloc.so.2",  # Debian: libmimalloc2.0
}

SUITE = r"""
import ctypes, os, threading

MB = 1 << 20


def test_bytes():
    kept = [bytearray(MB) for _ in range(100)]  # KEEP
    assert sum(len(b) for b in kept) == 100 * MB
    # The allocator's own size for such a buffer (its size class): what the shim counts.
    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.malloc_usable_size.restype = ctypes.c_size_t
    libc.malloc_usable_size.argtypes = [ctypes.c_void_p]
    libc.free.argtypes = [ctypes.c_void_p]
    p = libc.malloc(MB + 1)
    with open(os.environ["USABLE_TRUTH"], "w") as f:
        f.write(str(libc.malloc_usable_size(p)))
    libc.free(p)


def test_c_level():
    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.realloc.restype = ctypes.c_void_p
    libc.realloc.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    p = libc.realloc(libc.malloc(10), 50 * MB)
    ctypes.memset(p, 1, 50 * MB)
    libc.free(p)


def test_threads():
    out = []
    threads = [threading.Thread(target=lambda: out.append(len(str(list(range(10**5))))))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(out) == 4


def test_fails():
    assert 1 == 2
"""


def _find(name: str) -> Path | None:
    return next((Path(d) / name for d in LIBDIRS if (Path(d) / name).is_file()), None)


@pytest.mark.parametrize("allocator", sorted(ALLOCATORS))
def test_suite_with_another_allocator_preloaded(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, allocator: str
) -> None:
    library = _find(ALLOCATORS[allocator])
    if library is None:
        pytest.skip(f"{ALLOCATORS[allocator]} is not installed (.ci/run installs it on Debian)")
    path = pytester.makepyfile(test_alloc=SUITE)
    truth = pytester.path / "usable.txt"
    monkeypatch.setenv("USABLE_TRUTH", str(truth))
    for name, value in outside_xdist().items():
        monkeypatch.setenv(name, value)
    plain = pytester.runpytest_subprocess(*QUICK, timeout=300)
    plain.assert_outcomes(passed=3, failed=1)

    monkeypatch.setenv("LD_PRELOAD", str(library))
    unprofiled = pytester.runpytest_subprocess(*QUICK, timeout=300)
    unprofiled.assert_outcomes(passed=3, failed=1)
    out = pytester.path / "profile.json"
    profiled = pytester.runpytest_subprocess(
        "--profile", f"--profile-json={out}", *QUICK, timeout=300
    )
    assert profiled.ret == 1, profiled.stdout.str()  # the failing test, not a crash (139)
    profiled.assert_outcomes(passed=3, failed=1)
    assert f"memory is profiled through {library.name}" in profiled.stdout.str()
    tests = json.loads(out.read_text())["tests"]
    keep = line_at(tests["test_alloc.py::test_bytes"], path, "# KEEP")
    expected = 100 * int(truth.read_text()) / (1 << 20)  # 100 MB in glibc, 125 in jemalloc...
    assert abs(keep["alloc_mb"] - expected) <= 0.05 * expected, (keep, expected)
    assert tests["test_alloc.py::test_c_level"]["peak_mb"] >= 45
