"""The real pynvml over a stand-in libnvidia-ml.so.1 (tests/fake_nvml_lib.c, built here with the
C compiler): the plugin's NVML calls, pynvml's structs and the ctypes cost per sample, for real.
Skips where no C compiler is found."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import c_compiler

pytest.importorskip("pynvml")
HERE = Path(__file__).parent
COST_PROBE = r"""
import json, statistics, time
from pytest_scalene.sampling.gpu_nvml import open_nvml
from pytest_scalene.sampling.gpu_sampler import GpuSampler
from pytest_scalene.core.model import LineKey, TestProfile
from pytest_scalene.sampling.scope import CodeScope

devices = open_nvml()
reading = devices.read()
sampler = GpuSampler(devices, CodeScope("/nonexistent"), print)
profile = TestProfile("t")
key = LineKey("t.py", 1, "f")
sampler.start_test(profile)
sampler._began -= 1e6  # a long-running test: the read budget never holds a read back
batches = []
for _ in range(30):
    begin = time.perf_counter()
    for _ in range(200):
        sampler.on_cpu_sample(profile, None, key, 0.01)
    batches.append((time.perf_counter() - begin) / 200)
print(json.dumps({
    "names": devices.names, "per_process": devices.per_process, "accounting": devices.accounting,
    "util": reading.util_percent, "used_mb": reading.used_bytes / 2**20, "scope": reading.scope,
    "sample_us": 1e6 * statistics.median(batches), "line": profile.lines[key].extra,
}))
"""


@pytest.fixture(scope="module")
def stub_lib_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    compiler = c_compiler("the stand-in libnvidia-ml.so.1")
    out = tmp_path_factory.mktemp("fake_nvml_lib")
    subprocess.run(
        [
            compiler,
            "-shared",
            "-fPIC",
            "-O2",
            "-o",
            str(out / "libnvidia-ml.so.1"),
            str(HERE / "fake_nvml_lib.c"),
        ],
        check=True,
    )
    return out


def stub_env(lib_dir: Path, **figures: int) -> dict[str, str]:
    env = dict(os.environ, LD_LIBRARY_PATH=f"{lib_dir}:{os.environ.get('LD_LIBRARY_PATH', '')}")
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env.update({f"FAKE_NVML_{k.upper()}": str(v) for k, v in figures.items()})
    return env


@pytest.mark.parametrize(
    ("figures", "scope", "used_mb"),
    [({}, "process", 512.0), ({"accounting": 1, "proc_mb": 2048}, "process", 2048.0)],
)
def test_real_pynvml_reads_through_the_stub(stub_lib_dir, figures, scope, used_mb) -> None:
    env = stub_env(stub_lib_dir, **figures)
    done = subprocess.run(
        [sys.executable, "-c", COST_PROBE], env=env, capture_output=True, text=True, check=True
    )
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["names"] == ["Fake Stub GPU"]
    assert result["per_process"] is True
    assert result["accounting"] is bool(figures.get("accounting"))
    assert (result["util"], result["used_mb"], result["scope"]) == (42.0, used_mb, scope)
    assert result["line"] == {"gpu_util_percent": 42.0, "gpu_peak_mb": used_mb}
    # 1% of a 10 ms interval is 100 us; pynvml's ctypes path costs far less (no driver behind)
    assert result["sample_us"] < 100, result


@pytest.mark.slow
def test_profile_run_through_real_pynvml(stub_lib_dir, run_profiled, monkeypatch) -> None:
    for name, value in stub_env(stub_lib_dir, util=77, proc_mb=1024).items():
        monkeypatch.setenv(name, value)
    source = "def test_busy():\n    assert sum(i * i for i in range(1_000_000)) > 0\n"
    result, profile = run_profiled(source, "--profile-gpu=yes", "--profile-memory=no")
    result.assert_outcomes(passed=1)
    test = profile["tests"]["test_workload.py::test_busy"]
    assert test["gpu_peak_mb"] == 1024.0 and test["gpu_memory_scope"] == "process"
    lines = [ln for ln in test["lines"] if "gpu_util_percent" in ln]
    assert lines and all(ln["gpu_util_percent"] == 77.0 for ln in lines)
