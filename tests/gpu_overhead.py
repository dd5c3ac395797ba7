"""Measure what GPU sampling costs (docs/gpu.md, Must show #3). Run: .venv/bin/python
tests/gpu_overhead.py [runs] [--real]. Needs a C compiler for the stand-in libnvidia-ml.so.1;
with --real (on a GPU machine) the real driver is measured instead.

1. Where there is no GPU: the probe (once per session, at the first profiled test); after it
   nothing is registered, so each sample costs nothing more.
2. One on_cpu_sample call: fake pynvml module, and the real pynvml over the stand-in library.
3. A CPU benchmark under `pytest --profile` with GPU sampling on (the stand-in library): the time
   spent in the GPU listener, summed inside the run, as a share of the test's wall time.
4. The same benchmark, --profile-gpu=no against GPU sampling on, interleaved runs, medians of
   the process CPU time of the test body. On a loaded machine this one is noisy: see docs.
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
from pytest_scalene.sampling.gpu_nvml import GpuUnavailable, open_nvml
begin = time.perf_counter()
try:
    open_nvml().close()
    reason = "a GPU was found"
except GpuUnavailable as exc:
    reason = exc.reason
print(time.perf_counter() - begin, reason)
"""
BENCH = """
import os, time
def test_cpu_benchmark():
    begin, wall = time.process_time(), time.perf_counter()
    total = 0
    for i in range(6_000_000):
        total += i * i % 7
    words = {}
    for i in range(600_000):
        words[str(i % 5000)] = words.get(str(i % 5000), 0) + 1
    assert total > 0 and len(words) == 5000
    with open(os.environ["BENCH_OUT"], "w") as out:
        out.write(f"{time.process_time() - begin} {time.perf_counter() - wall}")
"""
# Times every GPU listener call inside the run (patched in both arms; used in one).
BENCH_CONFTEST = """
import os, time
from pytest_scalene.sampling import gpu_sampler
spent = [0.0, 0]
original = gpu_sampler.GpuSampler.on_cpu_sample
def timed(self, *args):
    begin = time.perf_counter()
    original(self, *args)
    spent[0] += time.perf_counter() - begin
    spent[1] += 1
gpu_sampler.GpuSampler.on_cpu_sample = timed
def pytest_unconfigure(config):
    with open(os.environ["LISTENER_OUT"], "w") as out:
        out.write(f"{spent[0]} {spent[1]}")
"""


def per_sample_us(sampler_factory, samples: int = 5000) -> float:
    from pytest_scalene.core.model import LineKey, TestProfile

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

    from pytest_scalene.sampling.gpu_nvml import open_nvml
    from pytest_scalene.sampling.gpu_sampler import GpuSampler
    from pytest_scalene.sampling.scope import CodeScope

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


def with_library(lib_dir: Path | None) -> dict[str, str]:
    """The environment that loads the stand-in library, or the real driver's (None)."""
    if lib_dir is None:
        return dict(os.environ)
    return dict(os.environ, LD_LIBRARY_PATH=str(lib_dir))


def stub_sample_us(lib_dir: Path | None) -> float:
    code = (
        f"import sys; sys.path.insert(0, {str(HERE)!r}); import gpu_overhead as g; "
        "from pytest_scalene.sampling.gpu_nvml import open_nvml; "
        "from pytest_scalene.sampling.gpu_sampler import GpuSampler; "
        "from pytest_scalene.sampling.scope import CodeScope; "
        "print(g.per_sample_us(lambda: GpuSampler(open_nvml(), CodeScope('/x'), print)))"
    )
    env = with_library(lib_dir)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    return float(done.stdout.split()[-1])


def bench(workdir: Path, lib_dir: Path | None, runs: int) -> tuple[dict[str, float], list[float]]:
    """Medians of the test body's CPU time per arm, and the listener's share of each GPU run."""
    (workdir / "test_bench.py").write_text(BENCH)
    (workdir / "conftest.py").write_text(BENCH_CONFTEST)
    times: dict[str, list[float]] = {"cpu only (--profile-gpu=no)": [], "gpu sampling on": []}
    shares = []
    for _ in range(runs):
        for label, gpu, env in [
            ("cpu only (--profile-gpu=no)", "no", dict(os.environ)),
            ("gpu sampling on", "yes", with_library(lib_dir)),
        ]:
            env["BENCH_OUT"], env["LISTENER_OUT"] = str(workdir / "body"), str(workdir / "gpu")
            command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
            command += ["--profile", f"--profile-gpu={gpu}", "test_bench.py"]
            subprocess.run(command, cwd=workdir, env=env, check=True, capture_output=True)
            cpu_s, wall_s = map(float, (workdir / "body").read_text().split())
            times[label].append(cpu_s)
            spent, calls = (workdir / "gpu").read_text().split()
            if gpu == "yes":
                assert int(calls) > 0, "the GPU listener never ran"
                shares.append(float(spent) / wall_s)
    return {label: statistics.median(values) for label, values in times.items()}, shares


def main() -> None:
    real = "--real" in sys.argv  # on a GPU machine: the real driver, not the stand-in
    numbers = [a for a in sys.argv[1:] if a.isdigit()]
    runs = int(numbers[0]) if numbers else 9
    probes = []
    for _ in range(5):
        done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True)
        seconds, reason = done.stdout.split(" ", 1)
        probes.append(float(seconds))
    print(
        f"probe (open_nvml): {1e3 * statistics.median(probes):.2f} ms once per session; "
        f"without a GPU no listener follows ({reason.strip()})"
    )
    for label, cost in fake_module_costs().items():
        print(
            f"on_cpu_sample, fake pynvml module, {label} scope: {cost:.1f} us "
            f"= {cost / 1e4:.3%} of each 10 ms interval"
        )
    with tempfile.TemporaryDirectory() as tmp:
        lib_dir = None if real else build_stub(Path(tmp))
        cost = stub_sample_us(lib_dir)
        print(
            f"on_cpu_sample, real pynvml over {'the driver' if real else 'the stand-in library'}: "
            f"{cost:.1f} us = {cost / 1e4:.3%} of each 10 ms interval"
        )
        workdir = Path(tmp) / "bench"
        workdir.mkdir()
        medians, shares = bench(workdir, lib_dir, runs)
    print(
        f"benchmark, time in the GPU listener / test wall time: median "
        f"{statistics.median(shares):.3%}, max {max(shares):.3%} over {runs} runs"
    )
    base = medians["cpu only (--profile-gpu=no)"]
    for label, value in medians.items():
        print(
            f"benchmark, {label}: median {value:.3f} s CPU over {runs} runs "
            f"({value / base - 1:+.2%})"
        )


if __name__ == "__main__":
    main()
