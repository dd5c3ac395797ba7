"""Copy-heavy code: bytes concatenation, array copies, list and bytearray slicing."""

from __future__ import annotations

import numpy as np


def run(scale: float) -> int:
    block = bytes(range(256)) * 4096  # 1 MiB
    arr = np.arange(4_000_000, dtype=np.float64)  # 32 MB
    items = list(range(200_000))
    total = 0
    for _ in range(max(1, int(115 * scale))):
        joined = block + block + block  # three 1 MiB copies
        buf = bytearray(joined)
        total += len(bytes(buf[1:]))
        copied = np.array(arr)  # a silent full copy
        total += int(copied[-1]) + int(arr.copy()[0])
        total += len(items[1:]) + len(list(items))
    return total
