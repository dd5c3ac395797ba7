"""The real-GPU check (issue 5, Must show #2): on a machine with an NVIDIA GPU and torch (with
CUDA) or cupy, a test allocates 1 GiB on the GPU on one line and runs a matmul loop on another;
the profile must show the memory on the first line and the utilisation on the second.

    .venv/bin/pytest tests/test_gpu_real.py -s -p no:cacheprovider
    PYTEST_SCALENE_GPU_RECORD=docs/gpu-real-run.md .venv/bin/pytest tests/test_gpu_real.py -s

Skips, saying why, where there is no GPU, no NVIDIA driver, or neither torch nor cupy.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from pytest_scalene.sampling.gpu_nvml import GpuUnavailable, open_nvml

pytestmark = pytest.mark.slow

PRELUDE = {
    "torch": """
import time
import torch

def test_gpu_work():
    torch.zeros(1, device="cuda")  # CONTEXT: CUDA starts before the measured lines
    x = torch.ones(2**28).to("cuda")  # ALLOC: 1 GiB of float32 copied to the GPU
    a = torch.randn(8192, 8192, device="cuda")
    end = time.perf_counter() + SECONDS
    while time.perf_counter() < end:
        b = (a @ a).sum().item()  # MATMUL: the GPU busy, the CPU waiting on it
    assert x.numel() == 2**28 and b == b
""",
    "cupy": """
import time
import cupy as cp
import numpy as np

def test_gpu_work():
    cp.zeros(1)  # CONTEXT: CUDA starts before the measured lines
    x = cp.asarray(np.ones(2**28, dtype=np.float32))  # ALLOC: 1 GiB copied to the GPU
    a = cp.random.random((8192, 8192), dtype=cp.float32)
    end = time.perf_counter() + SECONDS
    while time.perf_counter() < end:
        b = float((a @ a).sum())  # MATMUL: the GPU busy, the CPU waiting on it
    assert x.size == 2**28 and b == b
""",
}


def _gpu_names() -> list[str]:
    try:
        devices = open_nvml()
    except GpuUnavailable as exc:
        pytest.skip(f"no GPU to profile here: {exc.reason}")
    names = devices.names
    devices.close()
    return names


def _backend() -> str:
    if importlib.util.find_spec("torch") is not None:
        import torch

        if torch.cuda.is_available():
            return "torch"
    if importlib.util.find_spec("cupy") is not None:
        return "cupy"
    pytest.skip("neither torch with CUDA nor cupy is installed: pip install torch (or cupy)")


def _lines_at(test: dict, source: str, marker: str) -> list[dict]:
    number = next(i for i, text in enumerate(source.splitlines(), 1) if marker in text)
    return [ln for ln in test["lines"] if ln["line"] == number and "gpu_peak_mb" in ln]


def test_memory_on_the_alloc_line_and_utilisation_on_the_matmul_line(
    pytester: pytest.Pytester,
) -> None:
    names = _gpu_names()
    backend = _backend()
    source = PRELUDE[backend].replace("SECONDS", "3.0").lstrip("\n")
    pytester.makepyfile(test_gpu_work=source)
    out = pytester.path / "profile.json"
    # Wall-clock sampling: a line waiting on the GPU is sampled even while the CPU sleeps.
    result = pytester.runpytest_subprocess(
        "--profile",
        "--profile-gpu=yes",
        "--profile-clock=wall",
        f"--profile-json={out}",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(passed=1)
    profile = json.loads(out.read_text())
    test = profile["tests"]["test_gpu_work.py::test_gpu_work"]

    alloc = _lines_at(test, source, "# ALLOC")
    matmul = _lines_at(test, source, "# MATMUL")
    context = _lines_at(test, source, "# CONTEXT")
    report = "\n".join(
        [
            f"device: {', '.join(names)}; backend: {backend}; "
            f"gpu_memory_scope: {test['gpu_memory_scope']}; test gpu_peak_mb: "
            f"{test['gpu_peak_mb']:.0f}",
            "ALLOC line:  " + json.dumps(alloc),
            "MATMUL line: " + json.dumps(matmul),
            "notes: " + json.dumps(profile["notes"]),
            "",
            result.stdout.str().split("pytest-scalene profile", 1)[-1],
        ]
    )
    print(report)
    record = os.environ.get("PYTEST_SCALENE_GPU_RECORD")
    if record:
        Path(record).write_text(f"```\n{report}\n```\n")

    assert alloc and matmul, "no sample landed on the ALLOC or MATMUL line"
    alloc_mb = max(ln["gpu_peak_mb"] for ln in alloc)
    assert alloc_mb >= 1024, f"1 GiB allocated, {alloc_mb:.0f} MiB seen on the ALLOC line"
    if context and test["gpu_memory_scope"] == "process":
        before = max(ln["gpu_peak_mb"] for ln in context)
        assert alloc_mb - before >= 1000, (before, alloc_mb)
    busy = max(ln.get("gpu_util_percent", 0.0) for ln in matmul)
    assert busy >= 50, f"the matmul loop showed {busy:.0f}% GPU utilisation"
    assert test["gpu_peak_mb"] >= alloc_mb
