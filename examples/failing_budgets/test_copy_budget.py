"""Fails its copy budgets: np.array() copies of a 100 MB array. The first test is judged on the
MB it copies (counted: the same on every run), the second on its copy rate (MB/s, timed)."""

import time

import numpy as np
import pytest


def defensive_copies(data: np.ndarray, seconds: float) -> int:
    copies = 0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        copy = np.array(data)  # a full copy each time: the silent cost this budget catches
        copies += 1
        del copy
    return copies


@pytest.mark.perf_budget(copy_mb="100 MB")
def test_copy_volume_over_budget():
    data = np.ones(100 * 2**20 // 8)
    kept = []
    for _ in range(4):
        kept.append(np.array(data))  # 4 x 100 MB copied
    assert len(kept) == 4


@pytest.mark.perf_budget(copy_mb_s=50)
def test_copy_rate_over_budget():
    data = np.ones(100 * 2**20 // 8)
    assert defensive_copies(data, 0.5) > 0
