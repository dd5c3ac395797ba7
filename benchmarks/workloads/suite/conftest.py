"""The small-test suite: 50 quick tests, where the plugin's per-test cost shows."""

import os

import pytest


@pytest.fixture
def size() -> int:
    """Work per test: ~35 ms at full scale, a few ms in --quick mode."""
    return max(200, int(400_000 * float(os.environ.get("BENCH_SCALE", "1"))))
