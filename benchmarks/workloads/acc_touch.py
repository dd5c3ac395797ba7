"""Memory accuracy (the Scalene paper's test): allocate 512 MiB, touch a fraction of it.

The program asked for 512 MiB whatever the fraction, so an allocation-based profiler should
report a 512 MiB peak at every fraction; a tool that reads RSS sees only the touched pages.
"""

import os

import numpy as np

MIB = 1 << 20
FRACTION = float(os.environ.get("BENCH_TOUCH_FRACTION", "1"))


def test_touch():
    block = np.empty(512 * MIB, dtype=np.uint8)  # LINE_ALLOC
    block[: int(512 * MIB * FRACTION)] = 1
    assert block.nbytes == 512 * MIB
    del block
