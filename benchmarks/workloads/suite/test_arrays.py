import numpy as np
import pytest


@pytest.mark.parametrize("k", range(10))
def test_stats(size, k):
    rng = np.random.default_rng(k)
    x = rng.random(size * 4)
    assert abs(np.mean(x) - 0.5) < 0.05
    acc = 0.0
    for v in x[: size // 8]:
        acc += float(v)
    assert acc > 0
