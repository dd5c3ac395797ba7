"""Fails its peak-memory budget: a 256 MB array against a 100 MB budget."""

import numpy as np
import pytest


def load_frame() -> np.ndarray:
    return np.ones(256 * 2**20 // 8)  # 256 MB, every page touched


@pytest.mark.perf_budget(peak_mb="100 MB")
def test_peak_memory_over_budget():
    frame = load_frame()
    assert frame.sum() == frame.size
