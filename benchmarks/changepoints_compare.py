"""Which change point library finds an injected step best in this machine's noise?

Series: the recorded CPU times in tests/history/history_noise.json (consecutive real profiled
sessions on the shared development VM). Each trial takes a window of WINDOW runs, multiplies the
runs from a random position on by STEP (never a multiple of 5, so that no method's coarse grid
hits it by luck), and asks each method for change points; a second window of UNCHANGED runs,
left as recorded, must give none. Every method gets the same windows, the same MIN_STEP filter
(a change point counts only when the medians on its two sides differ by >= 10%, as
pytest_scalene/history/changepoints.py does) and its usual significance settings.

    python benchmarks/changepoints_compare.py [--trials 60]

The candidates are not dependencies of pytest-scalene: install them in a separate environment
(signal-processing-algorithms pins numpy < 2): pip install ruptures signal-processing-algorithms
apache-otava. A candidate that does not import is reported as such.
"""

from __future__ import annotations

import argparse
import json
import random
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

NOISE = Path(__file__).resolve().parent.parent / "tests" / "history" / "history_noise.json"
WINDOW, UNCHANGED, STEP, MIN_STEP, MIN_SEGMENT = 100, 200, 1.3, 0.10, 5


def keep_steps(y: np.ndarray, cuts: list[int]) -> list[int]:
    bounds, kept = [0, *cuts, len(y)], []
    for k, cut in enumerate(cuts, 1):
        before, after = np.median(y[bounds[k - 1] : cut]), np.median(y[cut : bounds[k + 1]])
        if abs(after - before) / min(before, after) >= MIN_STEP:
            kept.append(cut)
    return kept


def normalised(x: list[float]) -> np.ndarray:
    y = np.asarray(x, dtype=float)
    return y / np.median(y)


def methods() -> dict[str, Callable[[list[float]], list[int]] | str]:
    found: dict[str, Callable[[list[float]], list[int]] | str] = {}
    try:
        import ruptures as rpt

        def kernel_rbf(x: list[float]) -> list[int]:
            y = normalised(x)
            algo = rpt.KernelCPD(kernel="rbf", min_size=MIN_SEGMENT, jump=1).fit(y.reshape(-1, 1))
            return keep_steps(y, algo.predict(pen=3 * np.log(len(y)))[:-1])

        def kernel_linear(x: list[float]) -> list[int]:
            y = normalised(x)
            noise = 1.4826 * np.median(np.abs(np.diff(y))) / np.sqrt(2)
            algo = rpt.KernelCPD(kernel="linear", min_size=MIN_SEGMENT, jump=1).fit(y)
            return keep_steps(y, algo.predict(pen=3 * noise**2 * np.log(len(y)))[:-1])

        def pelt_l1(x: list[float]) -> list[int]:
            y = normalised(x)
            noise = 1.4826 * np.median(np.abs(np.diff(y))) / np.sqrt(2)
            algo = rpt.Pelt(model="l1", min_size=MIN_SEGMENT, jump=1).fit(y)
            return keep_steps(y, algo.predict(pen=3 * noise * np.log(len(y)))[:-1])

        found["ruptures KernelCPD, RBF kernel (chosen)"] = kernel_rbf
        found["ruptures KernelCPD, linear kernel (L2)"] = kernel_linear
        found["ruptures Pelt, L1 cost"] = pelt_l1
    except ImportError as exc:
        found["ruptures"] = f"not importable: {exc}"
    try:
        from signal_processing_algorithms.energy_statistics.energy_statistics import e_divisive

        def edivisive(x: list[float]) -> list[int]:
            y = normalised(x)
            return keep_steps(y, sorted(e_divisive(y, pvalue=0.01, permutations=100)))

        found["E-Divisive (signal-processing-algorithms)"] = edivisive
    except ImportError as exc:
        found["E-Divisive (signal-processing-algorithms)"] = f"not importable: {exc}"
    try:
        from otava.analysis import compute_change_points

        def otava(x: list[float]) -> list[int]:
            y = normalised(x)
            points, _ = compute_change_points(list(map(float, y)), window_len=30, max_pvalue=0.001)
            return keep_steps(y, [p.index for p in points])

        found["Apache Otava (E-Divisive, Hunter's t-test)"] = otava
    except ImportError as exc:
        found["Apache Otava"] = f"not importable: {exc}"
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=60)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    series = json.loads(NOISE.read_text())["series"]
    rng = random.Random(17)
    trials = []
    for k in range(args.trials):
        name = sorted(series)[k % len(series)]
        data = series[name]
        start = rng.randrange(0, len(data) - WINDOW + 1)
        at = rng.choice([i for i in range(15, WINDOW - 15) if i % 5])
        window = [
            v * (STEP if i >= at else 1.0) for i, v in enumerate(data[start : start + WINDOW])
        ]
        quiet_start = rng.randrange(0, len(data) - UNCHANGED + 1)
        trials.append((window, at, data[quiet_start : quiet_start + UNCHANGED]))
    print(
        f"{args.trials} trials: a {STEP}x step in {WINDOW} recorded runs, and {UNCHANGED} "
        "unchanged recorded runs"
    )
    print(
        "| method | step at the exact run | within 2 runs | other change points in the "
        "stepped series | any change point in 200 unchanged runs | ms per series |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for label, method in methods().items():
        if isinstance(method, str):
            print(f"| {label} | {method} | | | | |")
            continue
        exact = near = extra = false = 0
        spent = 0.0
        for window, at, quiet in trials:
            t0 = time.perf_counter()
            found = method(window)
            spent += time.perf_counter() - t0
            exact += at in found
            near += any(abs(c - at) <= 2 for c in found)
            extra += any(abs(c - at) > 2 for c in found)
            false += bool(method(quiet))
        n = len(trials)
        print(
            f"| {label} | {exact}/{n} | {near}/{n} | {extra}/{n} | {false}/{n} | "
            f"{spent / n * 1000:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
