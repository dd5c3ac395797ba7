"""Function bias: the same work done by calling a helper in a loop and inlined. The harness
sizes the two (BENCH_BIAS_N, BENCH_BIAS_M) so that the helper side takes a chosen share of the
time; the test records each side's thread CPU time as ground truth."""

import json
import os
import time

N = int(os.environ.get("BENCH_BIAS_N", "1000000"))
M = int(os.environ.get("BENCH_BIAS_M", "1000000"))
TRUTH = os.environ.get("BENCH_TRUTH", "bias-truth.json")


def helper(x):
    return x * x % 7


def calls_helper(n):
    acc = 0
    for i in range(n):
        acc += helper(i)
    return acc


def inlined(n):
    acc = 0
    for i in range(n):
        acc += i * i % 7
    return acc


def test_bias():
    t0 = time.thread_time()
    a = calls_helper(N)
    t1 = time.thread_time()
    b = inlined(M)
    t2 = time.thread_time()
    assert a >= 0 and b >= 0
    with open(TRUTH, "w") as f:
        json.dump({"calls_helper": t1 - t0, "inlined": t2 - t1}, f)
