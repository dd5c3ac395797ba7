"""Python's share of a line's allocations under both of Python's allocators. With pymalloc the
shim's domain wrappers let small requests through unmarked (they never reach malloc: their
arenas are counted as Python's); with PYTHONMALLOC=malloc every object reaches malloc, and a probe
at install must see that and mark them all, or small objects would read as native."""

from __future__ import annotations

import json

import pytest
from conftest import line_at
from shim_support import QUICK, needs_shim

pytestmark = [needs_shim, pytest.mark.slow]

SUITE = r"""
import ctypes

libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]


def test_shares():
    objects = [(i, i + 1) for i in range(1_000_000)]  # SMALL-OBJECTS
    blocks = [libc.malloc(1 << 20) for _ in range(60)]  # NATIVE-BLOCKS
    big = [bytes(4096) for _ in range(8_000)]  # LARGE-OBJECTS
    assert len(objects) == 1_000_000 and all(blocks) and len(big) == 8_000
    for block in blocks:
        libc.free(block)
"""


@pytest.mark.parametrize("allocator", ["pymalloc", "malloc"])
def test_python_share_per_line(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, allocator: str
) -> None:
    monkeypatch.setenv("PYTHONMALLOC", allocator)
    path = pytester.makepyfile(test_share=SUITE)
    out = pytester.path / "profile.json"
    result = pytester.runpytest_subprocess(
        "--profile", f"--profile-json={out}", "--profile-memory=yes", *QUICK, timeout=300
    )
    result.assert_outcomes(passed=1)
    test = json.loads(out.read_text())["tests"]["test_share.py::test_shares"]
    small = line_at(test, path, "# SMALL-OBJECTS")
    native = line_at(test, path, "# NATIVE-BLOCKS")
    large = line_at(test, path, "# LARGE-OBJECTS")
    assert small["alloc_mb"] >= 40, small  # a million tuples of two ints
    assert small["python_alloc_fraction"] >= 0.8, small
    assert large["alloc_mb"] >= 20, large  # 4 KB each: past pymalloc, to malloc (PyObject_Malloc)
    assert large["python_alloc_fraction"] >= 0.8, large
    assert native["alloc_mb"] >= 40, native
    assert native["python_alloc_fraction"] <= 0.2, native
