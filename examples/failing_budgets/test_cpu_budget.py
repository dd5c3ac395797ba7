"""Fails its CPU budget: about 0.5 s of pure Python against a 0.1 s budget."""

import pytest


def crunch(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


@pytest.mark.perf_budget(cpu_s=0.1)
def test_cpu_over_budget():
    assert crunch(4_000_000) > 0
