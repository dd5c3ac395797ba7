"""Measure what GPU sampling costs (docs/gpu.md, Must show #3). Run: .venv/bin/python
tests/gpu_overhead.py [runs]. Needs a C compiler for the stand-in libnvidia-ml.so.1.

1. The probe where there is no GPU: import pynvml + a failed nvmlInit, once per session.
2. One on_cpu_sample call: fake pynvml module, and the real pynvml over the stand-in library.
3. A CPU benchmark under `pytest --profile`: --profile-gpu=no against GPU sampling on (the
   stand-in library), interleaved runs, medians of the process CPU time the test body takes
   (signal handlers included; CPU time, not wall time, so that other load on the machine
   does not drown a 1% difference).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

PROBE = """
import time
begin = time.perf_counter()
from pytest_scalene.gpu_nvml import GpuUnavailable, open_nvml
try:
    open_nvml()
except GpuUnavailable as exc:
    print(time.perf_counter() - begin, exc.reason)
"""
BENCH = """
import os, time
def test_cpu_benchmark():
    begin = time.process_time()
    total = 0
    for i in range(6_000_000):
        total += i * i % 7
    words = {}
    for i in range(600_000):
        words[str(i % 5000)] = words.get(str(i % 5000), 0) + 1
    assert total > 0 and len(words) == 5000
    with open(os.environ["BENCH_OUT"], "w") as out:
        out.write(str(time.process_time() - begin))
"""


def per_sample_us(sampler_factory, samples: int = 5000) -> float:
    from pytest_scalene.model import LineKey, TestProfile

    sampler = sampler_factory()
    profile, key = TestProfile("t"), LineKey("t.py", 1, "f")
    sampler.start_test(profile)
    sampler._began -= 1e6  # the read budget never holds a read back: every call reads NVML
    batches = []
    for _ in range(samples // 100):
        begin = time.perf_counter()
        for _ in range(100):
            sampler.on_cpu_sample(profile, None, key, 0.01)
        batches.append((time.perf_counter() - begin) / 100)
    return 1e6 * statistics.median(batches)


def fake_module_costs() -> dict[str, float]:
    import fake_nvml

    from pytest_scalene.gpu_nvml import open_nvml
    from pytest_scalene.gpu_sampler import GpuSampler
    from pytest_scalene.scope import CodeScope

    costs = {}
    for label, state in [("process", {}), ("device", {"process_list_error": 3})]:
        sys.modules["pynvml"] = fake_nvml.FakeNvml(**state).module
        costs[label] = per_sample_us(
            lambda: GpuSampler(open_nvml(), CodeScope("/nonexistent"), print)
        )
    del sys.modules["pynvml"]
    return costs


def build_stub(out: Path) -> Path:
    lib = out / "libnvidia-ml.so.1"
    subprocess.run(
        ["cc", "-shared", "-fPIC", "-O2", "-o", str(lib), str(HERE / "fake_nvml_lib.c")],
        check=True,
    )
    return out


def stub_sample_us(lib_dir: Path) -> float:
    code = (
        f"import sys; sys.path.insert(0, {str(HERE)!r}); import gpu_overhead as g; "
        "from pytest_scalene.gpu_nvml import open_nvml; "
        "from pytest_scalene.gpu_sampler import GpuSampler; "
        "from pytest_scalene.scope import CodeScope; "
        "print(g.per_sample_us(lambda: GpuSampler(open_nvml(), CodeScope('/x'), print)))"
    )
    env = dict(os.environ, LD_LIBRARY_PATH=str(lib_dir))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    return float(done.stdout.split()[-1])


def bench(workdir: Path, lib_dir: Path, runs: int) -> dict[str, float]:
    (workdir / "test_bench.py").write_text(BENCH)
    times: dict[str, list[float]] = {"cpu only (--profile-gpu=no)": [], "gpu sampling on": []}
    for _ in range(runs):
        for label, gpu, env in [
            ("cpu only (--profile-gpu=no)", "no", dict(os.environ)),
            ("gpu sampling on", "yes", dict(os.environ, LD_LIBRARY_PATH=str(lib_dir))),
        ]:
            out = workdir / "cpu_s"
            env["BENCH_OUT"] = str(out)
            command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
            command += ["--profile", f"--profile-gpu={gpu}", "test_bench.py"]
            subprocess.run(command, cwd=workdir, env=env, check=True, capture_output=True)
            times[label].append(float(out.read_text()))
    return {label: statistics.median(values) for label, values in times.items()}


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 9
    probes = []
    for _ in range(5):
        done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True)
        seconds, reason = done.stdout.split(" ", 1)
        probes.append(float(seconds))
    print(
        f"probe without a GPU (import pynvml + failed nvmlInit): "
        f"{1e3 * statistics.median(probes):.1f} ms once per session ({reason.strip()})"
    )
    for label, cost in fake_module_costs().items():
        print(
            f"on_cpu_sample, fake pynvml module, {label} scope: {cost:.1f} us "
            f"= {cost / 1e4:.3%} of each 10 ms interval"
        )
    with tempfile.TemporaryDirectory() as tmp:
        lib_dir = build_stub(Path(tmp))
        cost = stub_sample_us(lib_dir)
        print(
            f"on_cpu_sample, real pynvml over the stand-in library, process scope: "
            f"{cost:.1f} us = {cost / 1e4:.3%} of each 10 ms interval"
        )
        workdir = Path(tmp) / "bench"
        workdir.mkdir()
        medians = bench(workdir, lib_dir, runs)
    base = medians["cpu only (--profile-gpu=no)"]
    for label, value in medians.items():
        print(
            f"benchmark, {label}: median {value:.3f} s over {runs} runs ({value / base - 1:+.2%})"
        )


if __name__ == "__main__":
    main()
