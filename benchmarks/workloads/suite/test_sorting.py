import random

import pytest


@pytest.mark.parametrize("k", range(10))
def test_sorted(size, k):
    rng = random.Random(k)
    data = [rng.random() for _ in range(size // 2)]
    result = sorted(data)
    assert all(a <= b for a, b in zip(result, result[1:], strict=False))
