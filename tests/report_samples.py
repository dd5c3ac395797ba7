"""A hand-built SessionProfile with stable, fake figures for the report tests, and the source
files it points at (written under a root directory by `write_sources`)."""

from __future__ import annotations

from pathlib import Path

from pytest_scalene.core.model import LineKey, LineStats, SessionProfile, TestProfile
from pytest_scalene.core.verdict import Verdict

LOAD_PY = '''\
"""Loads and cleans the input frame."""

import numpy as np


def load_frame(path):
    raw = np.fromfile(path, dtype=np.float64)
    frame = raw.reshape(-1, 8)
    cleaned = np.array(frame)  # a silent copy
    rows = [list(r) for r in cleaned]
    CACHE.append(rows)
    return cleaned


def summarise(frame):
    return frame.mean(axis=0)


CACHE = []
'''

TEST_ETL_PY = """\
from etl.load import load_frame, summarise


def test_load_frame(tmp_path):
    frame = load_frame(tmp_path / "input.bin")
    assert summarise(frame).shape == (8,)
"""

TEST_MATH_PY = """\
import numpy as np


def slow_sum(n):
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def test_matmul(size):
    a = np.ones((size, size))
    for _ in range(8):
        a = a @ a / size
    assert slow_sum(1_000_000) > 0
"""


def write_sources(root: Path) -> None:
    (root / "etl").mkdir(parents=True, exist_ok=True)
    (root / "tests").mkdir(parents=True, exist_ok=True)
    (root / "etl" / "load.py").write_text(LOAD_PY)
    (root / "tests" / "test_etl.py").write_text(TEST_ETL_PY)
    (root / "tests" / "test_math.py").write_text(TEST_MATH_PY)


def _line(
    test: TestProfile, file: str, line: int, function: str, py: float, nat: float, sys: float
) -> LineStats:
    stats = test.line(LineKey(file, line, function), function_line=1)
    stats.cpu_python_s, stats.cpu_native_s, stats.cpu_system_s = py, nat, sys
    stats.samples = max(1, round((py + nat + sys) / 0.01))
    return stats


def sample_session() -> SessionProfile:
    session = SessionProfile(interval_s=0.01, clock="cpu")

    etl = TestProfile("tests/test_etl.py::test_load_frame", outcome="failed", elapsed_s=2.31)
    etl.cpu_python_s, etl.cpu_native_s, etl.cpu_system_s = 0.84, 1.12, 0.14
    etl.extra.update(
        peak_mb=312.4,
        timeline=[[0.0, 0.0], [0.3, 120.5], [0.8, 240.0], [1.2, 312.4], [1.9, 180.2], [2.3, 182.0]],
        leaks=[{"file": "etl/load.py", "line": 11, "probability": 0.991, "rate_mb_s": 78.4}],
    )
    etl.verdicts = [
        Verdict.from_dict(v)  # as a profile's JSON holds them
        for v in (
            {
                "metric": "cpu_s",
                "limit": 3.0,
                "value": 2.1,
                "passed": True,
                "message": "cpu time 2.10 s <= budget 3.00 s",
            },
            {
                "metric": "peak_mb",
                "limit": 200.0,
                "value": 312.4,
                "passed": False,
                "message": "peak memory 312.4 MB > budget 200 MB "
                "(etl/load.py:9 load_frame: 290.1 MB)",
            },
        )
    ]
    load = "etl/load.py"
    figures = [
        # line, py, nat, sys, peak, alloc, python share, copy MB/s, timeline
        (7, 0.02, 0.61, 0.09, 120.5, 122.0, 0.01, 0.0, [[0.0, 0.0], [0.3, 120.5]]),
        (9, 0.01, 0.38, 0.04, 290.1, 120.5, 0.0, 402.7, [[0.3, 0.0], [0.8, 240.0], [1.2, 290.1]]),
        (10, 0.72, 0.08, 0.01, 60.3, 61.2, 0.97, 0.0, [[1.2, 0.0], [1.9, 60.3]]),
        (11, 0.004, 0.0, 0.0, 1.8, 1.8, 1.0, 0.0, [[1.9, 0.0], [2.3, 1.8]]),
    ]
    for line, py, nat, sys, peak, alloc, share, copy, timeline in figures:
        stats = _line(etl, load, line, "load_frame", py, nat, sys)
        stats.extra.update(
            peak_mb=peak,
            avg_mb=peak / 2,
            alloc_mb=alloc,
            python_alloc_fraction=share,
            copy_mb_s=copy,
            timeline=timeline,
        )
    _line(etl, load, 16, "summarise", 0.002, 0.003, 0.0)
    _line(etl, "tests/test_etl.py", 5, "test_load_frame", 0.085, 0.047, 0.0)
    session.tests[etl.nodeid] = etl

    mat = TestProfile("tests/test_math.py::test_matmul[1500]", outcome="passed", elapsed_s=4.02)
    mat.cpu_python_s, mat.cpu_native_s, mat.cpu_system_s = 0.61, 6.95, 0.08
    mat.extra.update(gpu_peak_mb=1024.0)
    math = "tests/test_math.py"
    _line(mat, math, 7, "slow_sum", 0.55, 0.02, 0.0)
    _line(mat, math, 6, "slow_sum", 0.05, 0.0, 0.0)
    _line(mat, math, 12, "test_matmul", 0.003, 0.04, 0.01)
    _line(mat, math, 14, "test_matmul", 0.007, 6.89, 0.07)
    mat.lines[LineKey(math, 14, "test_matmul")].extra.update(
        gpu_util_percent=87.5, gpu_peak_mb=1024
    )
    mat.lines[LineKey(math, 12, "test_matmul")].extra.update(gpu_util_percent=3.0, gpu_peak_mb=8)
    session.tests[mat.nodeid] = mat

    quick = TestProfile("tests/test_math.py::test_quick", outcome="passed", elapsed_s=0.004)
    session.tests[quick.nodeid] = quick

    session.notes.append("GPU figures are device totals: per-process accounting is off")
    return session
