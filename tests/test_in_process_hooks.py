"""Memory profiled without re-executing pytest (issue 28): the shim installed in the running
process (sampling/in_process_hooks.py, native/got_hooks.cpp). A memory profile under
pytest.main(), in an xdist worker, of a library loaded (dlopen) during the test, and the preload
kept for --profile-memory=preload."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import c_compiler, line_at
from shim_support import QUICK, needs_shim, outside_xdist

pytestmark = [needs_shim]
MB = 1 << 20

# A C library the test loads itself (ctypes: dlopen during the test), which allocates and copies
# with its own calls of malloc and memcpy: reached only through its own GOT entries.
LIBRARY_C = r"""
#include <stdlib.h>
#include <string.h>
void* grab(size_t n) {
    void* p = malloc(n);
    memset(p, 1, n);
    return p;
}
void* clone(const void* src, size_t n) {
    void* p = malloc(n);
    memcpy(p, src, n);
    return p;
}
void drop(void* p) { free(p); }
"""
# A library that opens a sibling by its bare name, found through its own RUNPATH ($ORIGIN/sub):
# glibc searches the caller's paths, and the caller of a dlopen wrapper is the wrapper's object.
# And one that looks a symbol up relative to itself (RTLD_NEXT), as interposers do.
OUTER_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
void* open_sibling(size_t n) {
    void* handle = dlopen("libinner_scalene.so", RTLD_NOW);
    if (!handle) return NULL;
    void* (*grab)(size_t) = (void* (*)(size_t))dlsym(handle, "grab");
    return grab ? grab(n) : NULL;
}
int next_found(void) { return dlsym(RTLD_NEXT, "getpid") != NULL; }
"""

SUITE = r"""
import ctypes, os

MB = 1 << 20


def test_python_objects():
    kept = [bytearray(MB) for _ in range(80)]  # PYTHON
    assert len(kept) == 80


def test_a_library_loaded_during_the_test():
    lib = ctypes.CDLL(os.environ["GRAB_LIBRARY"])
    lib.grab.restype = lib.clone.restype = ctypes.c_void_p
    lib.grab.argtypes = [ctypes.c_size_t]
    lib.clone.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    lib.drop.argtypes = [ctypes.c_void_p]
    first = lib.grab(120 * MB)  # NATIVE
    second = lib.clone(first, 120 * MB)  # COPY
    lib.drop(first)
    lib.drop(second)


def test_a_library_that_opens_its_sibling():
    outer = ctypes.CDLL(os.environ["OUTER_LIBRARY"])
    outer.open_sibling.restype = ctypes.c_void_p
    outer.open_sibling.argtypes = [ctypes.c_size_t]
    assert outer.next_found() == 1
    block = outer.open_sibling(64 * MB)  # SIBLING
    assert block
    ctypes.CDLL(os.environ["GRAB_LIBRARY"]).drop(ctypes.c_void_p(block))


def test_a_library_closed_before_the_end():
    import _ctypes

    handle = _ctypes.dlopen(os.environ["CLOSED_LIBRARY"], os.RTLD_NOW)
    lib = ctypes.CDLL(os.environ["CLOSED_LIBRARY"], handle=handle)
    lib.grab.restype = ctypes.c_void_p
    lib.grab.argtypes = [ctypes.c_size_t]
    lib.drop.argtypes = [ctypes.c_void_p]
    lib.drop(lib.grab(MB))
    del lib
    _ctypes.dlclose(handle)  # unmapped, with its rewritten entries: never written again
"""


@pytest.fixture(scope="module")
def grab_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    compiler = c_compiler("the libraries the tests load")
    where = tmp_path_factory.mktemp("grab")
    (where / "grab.c").write_text(LIBRARY_C)
    (where / "outer.c").write_text(OUTER_C)
    (where / "sub").mkdir()
    library = where / "libgrab.so"
    # -O0: neither call may be folded away or turned into calloc.
    build = [compiler, "-O0", "-shared", "-fPIC"]
    subprocess.run([*build, "-o", str(library), str(where / "grab.c")], check=True)
    closed = where / "libgrab_closed.so"
    subprocess.run([*build, "-o", str(closed), str(where / "grab.c")], check=True)
    inner = where / "sub" / "libinner_scalene.so"
    subprocess.run([*build, "-o", str(inner), str(where / "grab.c")], check=True)
    outer = [*build, "-Wl,--enable-new-dtags,-rpath,$ORIGIN/sub", "-o", str(where / "libouter.so")]
    subprocess.run([*outer, str(where / "outer.c"), "-ldl"], check=True)
    return library


def _check(tests: dict, path: Path) -> None:
    python = tests["test_mem.py::test_python_objects"]
    assert abs(line_at(python, path, "# PYTHON")["alloc_mb"] - 80) <= 4, python["lines"]
    native = tests["test_mem.py::test_a_library_loaded_during_the_test"]
    assert abs(line_at(native, path, "# NATIVE")["alloc_mb"] - 120) <= 2, native["lines"]
    assert abs(line_at(native, path, "# COPY")["alloc_mb"] - 120) <= 2, native["lines"]
    # Copy volume is rate-sampled: the copy's line holds (nearly) all of it.
    assert line_at(native, path, "# COPY").get("copy_mb", 0) >= 100, native["lines"]
    sibling = tests["test_mem.py::test_a_library_that_opens_its_sibling"]
    assert abs(line_at(sibling, path, "# SIBLING")["alloc_mb"] - 64) <= 2, sibling["lines"]


def _suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, library: Path) -> Path:
    monkeypatch.setenv("GRAB_LIBRARY", str(library))
    monkeypatch.setenv("OUTER_LIBRARY", str(library.parent / "libouter.so"))
    monkeypatch.setenv("CLOSED_LIBRARY", str(library.parent / "libgrab_closed.so"))
    for name in set(os.environ) - set(outside_xdist()):  # this run's own -n, if any
        monkeypatch.delenv(name)
    return pytester.makepyfile(test_mem=SUITE)


@pytest.mark.slow
def test_under_pytest_main_twice(pytester, monkeypatch, grab_library):
    """pytest.main() cannot be re-executed: before, no memory at all; now the same figures,
    in a second call too (the hooks are taken out when the first returns, and put back)."""
    path = _suite(pytester, monkeypatch, grab_library)
    outs = [pytester.path / "first.json", pytester.path / "second.json"]
    script = pytester.path / "run_main.py"
    script.write_text(
        "import sys, pytest\n"
        "from pytest_scalene.sampling import in_process_hooks\n"
        f"for out in {[str(o) for o in outs]!r}:\n"
        f"    code = pytest.main(['--profile', '--profile-json=' + out, *{list(QUICK)!r}])\n"
        "    print('EXIT', int(code), 'HOOKED AFTER', in_process_hooks.hooked_entries())\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], cwd=pytester.path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.count("EXIT 0 HOOKED AFTER 0") == 2, done.stdout[-3000:]
    for out in outs:
        _check(json.loads(out.read_text())["tests"], path)


@pytest.mark.slow
@pytest.mark.parametrize("memory", ["yes", "preload"])
def test_in_process_and_preloaded_read_the_same(pytester, monkeypatch, grab_library, memory):
    path = _suite(pytester, monkeypatch, grab_library)
    out = pytester.path / "profile.json"
    result = pytester.runpytest_subprocess(
        "--profile", f"--profile-memory={memory}", f"--profile-json={out}", *QUICK, timeout=300
    )
    result.assert_outcomes(passed=4)
    _check(json.loads(out.read_text())["tests"], path)


@pytest.mark.slow
def test_in_an_xdist_worker(pytester, monkeypatch, grab_library):
    pytest.importorskip("xdist")
    path = _suite(pytester, monkeypatch, grab_library)
    out = pytester.path / "profile.json"
    result = pytester.runpytest_subprocess(
        "-n", "2", "--profile", f"--profile-json={out}", *QUICK, timeout=300
    )
    result.assert_outcomes(passed=4)
    _check(json.loads(out.read_text())["tests"], path)


NESTED = """
import pytest


def test_outer():
    assert pytest.main(["-q", "-p", "no:cacheprovider", "--profile", "inner/test_in.py"]) == 0
"""


def test_a_session_inside_a_profiled_test(pytester):
    """pytest.main() inside a profiled test: the shim is the outer session's, so the inner one
    profiles CPU only and says why; the outer test passes with its memory profile, which holds
    the inner test's allocation at its line."""
    pytester.mkdir("inner")
    (pytester.path / "inner" / "test_in.py").write_text(
        "def test_inner():\n    block = bytearray(24 << 20)  # ALLOCATE\n    assert len(block)\n"
    )
    pytester.makepyfile(test_outer=NESTED)
    out = pytester.path / "outer.json"
    result = pytester.runpytest_subprocess(
        "test_outer.py", "-s", "-p", "no:cacheprovider", "--profile", f"--profile-json={out}"
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*MemorySampler failed to start*the allocator shim is already*"])
    outer = json.loads(out.read_text())["tests"]["test_outer.py::test_outer"]
    assert outer["outcome"] == "passed"
    line = line_at(outer, pytester.path / "inner" / "test_in.py", "# ALLOCATE")
    assert line["alloc_mb"] >= 20, line
