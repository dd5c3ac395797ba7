"""Resident memory (issue 14): a 512 MB array touched 0/10/50/100% is allocated 512 MB each time,
and the test's resident growth (rss_mb) is the part touched; per line, a Python loop that
touches an array page by page is charged the pages it touched (its two lines, where the CPU
samples land)."""

from __future__ import annotations

import pytest
from conftest import line_at
from shim_support import needs_shim, run_profiled_suite

pytestmark = [needs_shim, pytest.mark.slow]
np = pytest.importorskip("numpy")

SUITE = r"""
import numpy as np
import pytest

MB = 1 << 20


@pytest.mark.parametrize("touch", [0, 10, 50, 100])
def test_array(touch):
    a = np.empty(512 * MB, dtype=np.uint8)  # ALLOCATE
    a[: 512 * MB * touch // 100] = 1
    del a


def test_page_by_page():
    # Slow enough (~0.5 s) for many CPU samples: the growth after the last one is not charged.
    a = np.empty(128 * MB, dtype=np.uint8)
    for i in range(0, 128 * MB, 4096):
        a[i] = sum(range(1500)) & 1  # PAGES
"""


def test_resident_growth(pytester: pytest.Pytester) -> None:
    tests, path = run_profiled_suite(pytester, "test_resident", SUITE, passed=5)
    for touch in (0, 10, 50, 100):
        test = tests[f"test_resident.py::test_array[{touch}]"]
        allocated = line_at(test, path, "# ALLOCATE")["alloc_mb"]
        assert abs(allocated - 512) <= 0.01 * 512, (touch, allocated)
        touched = 512 * touch / 100
        # 5% of the touched size; 2 MB for what the interpreter itself touches meanwhile.
        assert abs(test["rss_mb"] - touched) <= 0.05 * touched + 2, (touch, test["rss_mb"])
    test = tests["test_resident.py::test_page_by_page"]
    assert abs(test["rss_mb"] - 128) <= 0.05 * 128 + 2, test["rss_mb"]
    # Charged where the CPU samples land: the loop's two lines (the body and its `for`).
    loop = [ln for ln in test["lines"] if ln["function"] == "test_page_by_page"]
    assert sum(ln.get("rss_mb", 0) for ln in loop) >= 0.8 * 128, loop
    assert line_at(test, path, "# PAGES")["rss_mb"] >= 0.4 * 128, loop
    assert sum(ln.get("rss_mb", 0) for ln in test["lines"]) <= test["rss_mb"] + 2
