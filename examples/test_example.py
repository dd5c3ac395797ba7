"""A small suite to try pytest-scalene on: `pytest --profile examples/`."""

import numpy as np


def python_work(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def test_python_and_native():
    total = python_work(2_000_000)  # pure Python: shows as Python time
    matrix = np.random.default_rng(0).random((1500, 1500))
    for _ in range(8):
        matrix = matrix @ matrix / 1500.0  # BLAS: shows as native time
    assert total > 0 and matrix.shape == (1500, 1500)


def test_allocations():
    rows = [list(range(100)) for _ in range(20_000)]  # many small Python objects
    block = np.ones(40_000_000 // 8)  # one 40 MB native allocation
    assert len(rows) == 20_000 and block.sum() == block.size
