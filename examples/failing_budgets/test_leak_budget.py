"""Fails its leak budget: 1 MB buffers appended to a module-level list for over a second."""

import time

import pytest

_cache: list[bytearray] = []


def remember(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        _cache.append(bytearray(2**20))  # never released: a leak
        time.sleep(0.002)


@pytest.mark.perf_budget(leaks=False)
def test_leak_over_budget():
    remember(1.2)
    assert _cache
