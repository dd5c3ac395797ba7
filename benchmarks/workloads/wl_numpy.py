"""Native work: numpy sorts, FFTs, matrix products and reductions on large arrays."""

from __future__ import annotations

import numpy as np


def run(scale: float) -> float:
    rng = np.random.default_rng(3)
    data = rng.random(2_000_000)
    mat = rng.random((400, 400))
    acc = 0.0
    for _ in range(max(1, int(15 * scale))):
        acc += float(np.sort(data)[1000])
        acc += float(np.abs(np.fft.rfft(data)).max())
        acc += float((mat @ mat).trace())
        acc += float(np.cumsum(data * 1.0001)[-1])
    return acc
