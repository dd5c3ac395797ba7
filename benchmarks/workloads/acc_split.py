"""Python/native split with ground truth: line A is a pure-Python loop (100% Python), line B
a numpy sort (native); the test records the time each took, on the main thread or a worker."""

import json
import os
import threading
import time

import numpy as np

SCALE = float(os.environ.get("BENCH_SCALE", "1"))
TRUTH = os.environ.get("BENCH_TRUTH", "split-truth.json")
N_PY = int(int(os.environ.get("BENCH_SPLIT_N_PY", "4000000")) * SCALE)
N_NP = max(1, int(int(os.environ.get("BENCH_SPLIT_N_NP", "10")) * SCALE))


def workload(record):
    data = np.random.default_rng(1).random(2_000_000)
    t0 = time.thread_time()
    acc = 0
    for i in range(N_PY):  # LINE_A
        acc += i * i % 7  # LINE_A
    t1 = time.thread_time()
    for _ in range(N_NP):  # LINE_B
        data.copy().sort()  # LINE_B
    t2 = time.thread_time()
    record.update(a=t1 - t0, b=t2 - t1)


def _save(record):
    with open(TRUTH, "w") as f:
        json.dump(record, f)


def test_split_main():
    record = {}
    workload(record)
    _save(record)


def test_split_thread():
    record = {}
    worker = threading.Thread(target=workload, args=(record,))
    worker.start()
    worker.join()
    _save(record)
