"""Threads: Python-bound workers contending for the GIL, next to numpy work that releases it,
while the main thread waits in join()."""

from __future__ import annotations

import threading

import numpy as np


def python_worker(n: int, out: list[int]) -> None:
    acc = 0
    for i in range(n):
        acc += (i * i) % 11
    out.append(acc)


def numpy_worker(rounds: int, out: list[int]) -> None:
    data = np.random.default_rng(5).random(1_000_000)
    for _ in range(rounds):
        out.append(int(np.sort(data).argmax()))


def run(scale: float) -> int:
    out: list[int] = []
    n = max(50_000, int(7_000_000 * scale))
    workers = [threading.Thread(target=python_worker, args=(n, out)) for _ in range(2)]
    workers.append(threading.Thread(target=numpy_worker, args=(max(1, int(50 * scale)), out)))
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return sum(out)
