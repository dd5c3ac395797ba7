"""GPU sampling against a fake NVML (tests/fake_nvml.py in sys.modules["pynvml"]): probing and
its reasons, memory scope, figures landing on the right lines, the read budget, failures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from fake_nvml import (
    MB,
    NVML_ERROR_DRIVER_NOT_LOADED,
    NVML_ERROR_GPU_IS_LOST,
    NVML_ERROR_LIBRARY_NOT_FOUND,
    NVML_ERROR_NO_PERMISSION,
    NVML_ERROR_NOT_SUPPORTED,
    FakeNvml,
)

from pytest_scalene.config.options import ProfileOptions
from pytest_scalene.core import model
from pytest_scalene.core.model import LineKey
from pytest_scalene.sampling import gpu_nvml
from pytest_scalene.sampling.gpu_nvml import GpuUnavailable, open_nvml
from pytest_scalene.sampling.gpu_sampler import TIME_BUDGET, GpuSampler, GpuSetup
from pytest_scalene.sampling.profiler import Profiler
from pytest_scalene.sampling.scope import CodeScope

LINE_A = LineKey("test_x.py", 4, "test_x")
LINE_B = LineKey("test_x.py", 5, "test_x")


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch):
    """Install a FakeNvml as pynvml; the test sets its fields before opening it."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    def install(**state) -> FakeNvml:
        nvml = FakeNvml(**state)
        monkeypatch.setitem(sys.modules, "pynvml", nvml.module)
        return nvml

    return install


class Clock:
    """A clock the test advances: each sample is `step` seconds after the last."""

    def __init__(self, step: float = 0.01) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        return self.now


def sampler_for(devices: gpu_nvml.NvmlDevices, clock: Clock | None = None):
    notes: list[str] = []
    sampler = GpuSampler(devices, CodeScope("/nonexistent"), notes.append, clock or Clock())
    return sampler, notes


def started(clock: Clock | None = None):
    """A GpuSampler over the installed fake, started on a fresh test."""
    sampler, notes = sampler_for(open_nvml(), clock)
    profile = model.TestProfile("t")
    sampler.start_test(profile)
    return sampler, notes, profile


def sample(
    sampler: GpuSampler, profile: model.TestProfile, key: LineKey | None, clock: Clock
) -> None:
    clock.now += clock.step
    sampler.on_cpu_sample(profile, None, key, clock.step)


# -- probing: why there is no GPU -------------------------------------------------------------
def test_no_pynvml_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    with pytest.raises(GpuUnavailable, match=r"pynvml is not installed .*pytest-scalene\[gpu\]"):
        open_nvml()


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (NVML_ERROR_LIBRARY_NOT_FOUND, r"libnvidia-ml\.so\.1\) was not found"),
        (NVML_ERROR_DRIVER_NOT_LOADED, "driver is not loaded"),
        (NVML_ERROR_NO_PERMISSION, "no permission to query the GPU"),
        (999, "NVML error: NVML error 999"),
    ],
)
def test_init_errors_become_reasons(fake, code: int, reason: str) -> None:
    nvml = fake(init_error=code)
    with pytest.raises(GpuUnavailable, match=reason):
        open_nvml()
    assert nvml.calls["nvmlDeviceGetCount"] == 0


def test_no_device(fake) -> None:
    nvml = fake(devices=0)
    with pytest.raises(GpuUnavailable, match="found no NVIDIA GPU"):
        open_nvml()
    assert nvml.calls["nvmlShutdown"] == 1  # initialised, so shut down again


def test_real_pynvml_without_a_driver_names_the_reason() -> None:
    """On this machine: the real pynvml, and no NVIDIA driver (skips where there is a GPU)."""
    pytest.importorskip("pynvml")
    try:
        devices = open_nvml()
    except GpuUnavailable as exc:
        assert "driver" in exc.reason or "GPU" in exc.reason
    else:
        devices.close()
        pytest.skip("an NVIDIA GPU is present: this test is for machines without one")


@pytest.mark.parametrize(
    ("visible", "indices"), [("1", [1]), ("1,0", [1, 0]), ("GPU-x-1", [1]), ("0,7,1", [0])]
)
def test_cuda_visible_devices_selects_devices(fake, monkeypatch, visible, indices) -> None:
    fake(devices=2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    devices = open_nvml()
    assert [h.index for h in devices.handles] == indices
    assert devices.names == [f"Fake GPU {i}" for i in indices]


@pytest.mark.parametrize("visible", ["", "-1"])
def test_cuda_visible_devices_hiding_every_gpu(fake, monkeypatch, visible) -> None:
    fake(devices=2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    with pytest.raises(GpuUnavailable, match="leaves no GPU"):
        open_nvml()


# -- memory scope ------------------------------------------------------------------------------
def test_device_without_per_process_memory_reads_device_totals(fake) -> None:
    nvml = fake(devices=2, process_list_error=NVML_ERROR_NOT_SUPPORTED, util=30)
    nvml.device_used_mb = 1000
    devices = open_nvml()
    assert not devices.per_process and not devices.accounting
    reading = devices.read()
    assert reading.scope == "device" and "does not report per-process" in reading.why_device
    assert reading.used_bytes == 2 * 1000 * MB  # both devices
    assert reading.util_percent == 30


def test_per_process_memory_counts_this_process_and_its_children(fake) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        processes = [
            [(child.pid, 200 * MB), (1, 5000 * MB)],  # pid 1: someone else
            [(gpu_nvml.os.getpid(), 300 * MB)],
        ]
        fake(devices=2, processes=processes, device_used_mb=9999)
        reading = open_nvml().read()
    finally:
        child.kill()
        child.wait()
    assert reading.scope == "process"
    assert reading.used_bytes == 500 * MB


def test_pids_from_another_pid_namespace_fall_back_to_device(fake) -> None:
    hidden_pid = 2**22 + 17  # above Linux's pid_max: never in our /proc
    fake(processes=[[(hidden_pid, 700 * MB)]], device_used_mb=700)
    reading = open_nvml().read()
    assert reading.scope == "device" and reading.used_bytes == 700 * MB
    assert "PID namespace" in reading.why_device


def test_process_memory_not_available_falls_back_to_device(fake) -> None:
    fake(processes=[[(gpu_nvml.os.getpid(), None)]], device_used_mb=800)
    reading = open_nvml().read()
    assert reading.scope == "device" and reading.used_bytes == 800 * MB


# -- figures on lines --------------------------------------------------------------------------
def test_figures_land_on_the_lines_that_ran(fake) -> None:
    """Line A holds 1 GiB at low utilisation, line B runs kernels at 90-100%."""
    nvml = fake(accounting=True)
    sampler, notes = sampler_for(open_nvml())
    clock = sampler.clock
    profile = model.TestProfile("t")
    sampler.start_test(profile)
    nvml.process_mb, nvml.util = 1024, 5
    for _ in range(10):
        sample(sampler, profile, LINE_A, clock)
    nvml.process_mb = 1536  # B's matmul buffers
    for util in (90, 100) * 10:
        nvml.util = util
        sample(sampler, profile, LINE_B, clock)
    nvml.process_mb = 2048  # outside profiled code: counts for the test only
    sample(sampler, profile, None, clock)
    sampler.stop_test(profile)

    a, b = profile.lines[LINE_A].extra, profile.lines[LINE_B].extra
    assert a == {"gpu_util_percent": 5.0, "gpu_peak_mb": 1024.0}
    assert b["gpu_util_percent"] == pytest.approx(95.0)
    assert b["gpu_peak_mb"] == 1536.0
    assert profile.extra == {"gpu_peak_mb": 2048.0, "gpu_memory_scope": "process"}
    assert notes == []
    # handles found once, at probe time
    assert nvml.calls["nvmlDeviceGetHandleByIndex"] == 1


def test_process_list_is_read_again_only_when_device_memory_moves(fake) -> None:
    nvml = fake(process_mb=100)
    sampler, _, profile = started()
    listed = nvml.calls["nvmlDeviceGetComputeRunningProcesses"]
    for _ in range(10):
        sample(sampler, profile, LINE_A, sampler.clock)
    assert nvml.calls["nvmlDeviceGetComputeRunningProcesses"] == listed
    nvml.process_mb = 700  # moves the device's total too
    for _ in range(10):
        sample(sampler, profile, LINE_B, sampler.clock)
    assert nvml.calls["nvmlDeviceGetComputeRunningProcesses"] == listed + 1
    assert profile.lines[LINE_B].extra["gpu_peak_mb"] == 700.0
    sampler.start_test(model.TestProfile("next"))  # a new test lists again (PIDs are reused)
    assert nvml.calls["nvmlDeviceGetComputeRunningProcesses"] == listed + 2


def test_device_scope_is_flagged_in_the_test_and_once_in_the_notes(fake) -> None:
    nvml = fake(process_list_error=NVML_ERROR_NO_PERMISSION, device_used_mb=4000, util=50)
    sampler, notes = sampler_for(open_nvml())
    for nodeid in ("t1", "t2"):
        profile = model.TestProfile(nodeid)
        sampler.start_test(profile)
        sample(sampler, profile, LINE_A, sampler.clock)
        sampler.stop_test(profile)
        assert profile.extra == {"gpu_peak_mb": 4000.0, "gpu_memory_scope": "device"}
    assert nvml.calls["nvmlDeviceGetMemoryInfo"] >= 2
    assert len(set(notes)) == 1 and "whole device (Fake GPU 0)" in notes[0]


def test_accounting_high_water_catches_a_peak_between_samples(fake) -> None:
    nvml = fake(accounting=True, high_water_mb=100)
    sampler, _, profile = started()
    nvml.process_mb = 300
    sample(sampler, profile, LINE_A, sampler.clock)
    nvml.high_water_mb = 5000  # a brief 5000 MB spike no sample saw
    nvml.process_mb = 300
    sampler.stop_test(profile)
    assert profile.extra["gpu_peak_mb"] == 5000.0
    assert profile.lines[LINE_A].extra["gpu_peak_mb"] == 300.0


def test_high_water_that_did_not_rise_is_an_earlier_tests_peak(fake) -> None:
    nvml = fake(accounting=True, high_water_mb=5000, process_mb=300)
    sampler, _, profile = started()
    sample(sampler, profile, LINE_A, sampler.clock)
    sampler.stop_test(profile)
    assert profile.extra["gpu_peak_mb"] == 300.0
    assert nvml.calls["nvmlDeviceGetAccountingStats"] == 2


def test_without_accounting_the_high_water_is_not_read(fake) -> None:
    nvml = fake(process_mb=300)
    sampler, _, profile = started()
    sampler.stop_test(profile)
    assert nvml.calls["nvmlDeviceGetAccountingStats"] == 0
    assert profile.extra["gpu_peak_mb"] == 300.0


def test_mig_without_utilisation_still_reports_memory(fake) -> None:
    fake(util_error=NVML_ERROR_NOT_SUPPORTED, process_mb=64)
    devices = open_nvml()
    assert not devices.util_supported
    sampler, _ = sampler_for(devices)
    profile = model.TestProfile("t")
    sampler.start_test(profile)
    sample(sampler, profile, LINE_A, sampler.clock)
    assert profile.lines[LINE_A].extra == {"gpu_peak_mb": 64.0}


# -- cost and failures -------------------------------------------------------------------------
def test_slow_nvml_reads_stay_within_the_budget(fake) -> None:
    """Each read takes 2 ms of a 10 ms interval (20%): readings are reused to stay at 0.5%."""
    nvml = fake(util=70)
    clock = Clock()
    real_read = gpu_nvml.NvmlDevices.read

    def slow_read(self):
        clock.now += 0.002
        return real_read(self)

    sampler, notes = sampler_for(open_nvml(), clock)
    sampler.devices.read = slow_read.__get__(sampler.devices)
    profile = model.TestProfile("t")
    sampler.start_test(profile)
    start = clock.now
    for _ in range(1000):
        sample(sampler, profile, LINE_A, clock)
    sampler.stop_test(profile)
    # less the probe's two reads, start_test's and stop_test's
    reads = nvml.calls["nvmlDeviceGetUtilizationRates"] - 4
    spent = 0.002 * reads
    assert spent <= TIME_BUDGET * (clock.now - start) + 0.002  # the budget is checked before
    assert reads > 10  # still refreshed
    assert profile.lines[LINE_A].extra["gpu_util_percent"] == 70.0
    assert any("NVML reads are slow here (~2000 us each)" in n for n in notes)


def test_a_reused_reading_never_lands_on_another_line(fake) -> None:
    """Over budget, line B must not get the reading taken at line A (A's memory, A's util)."""
    nvml = fake(util=5, process_mb=1024)
    clock = Clock()
    sampler, _, profile = started(clock)
    sample(sampler, profile, LINE_A, clock)
    sampler._spent = 1.0  # far over budget from here on: every sample reuses
    nvml.util, nvml.process_mb = 90, 1536
    for _ in range(5):
        sample(sampler, profile, LINE_A, clock)
        sample(sampler, profile, LINE_B, clock)
    assert LINE_B not in profile.lines
    assert profile.lines[LINE_A].extra == {"gpu_util_percent": 5.0, "gpu_peak_mb": 1024.0}
    sampler._spent = 0.0  # back under budget: B is read fresh
    sample(sampler, profile, LINE_B, clock)
    assert profile.lines[LINE_B].extra == {"gpu_util_percent": 90.0, "gpu_peak_mb": 1536.0}


def test_a_gpu_lost_mid_test_stops_gpu_sampling_with_a_note(fake) -> None:
    nvml = fake(process_mb=10)
    sampler, notes, profile = started()
    sample(sampler, profile, LINE_A, sampler.clock)
    nvml.read_error = NVML_ERROR_GPU_IS_LOST
    sample(sampler, profile, LINE_B, sampler.clock)  # must not raise into the CPU sampler
    sampler.stop_test(profile)
    assert sampler.broken and LINE_B not in profile.lines
    assert len(notes) == 1 and "GPU sampling stopped after an NVML error" in notes[0]
    calls = sum(nvml.calls.values())
    sampler.start_test(model.TestProfile("next"))
    sample(sampler, profile, LINE_A, sampler.clock)
    assert sum(nvml.calls.values()) == calls  # no more NVML calls once broken


# -- the session set-up ------------------------------------------------------------------------
def profiler_with(gpu: str, tmp_path: Path) -> Profiler:
    options = ProfileOptions(enabled=True, memory="no", gpu=gpu)
    return Profiler(options, str(tmp_path))


def test_setup_no_never_loads_nvml(fake, tmp_path: Path) -> None:
    nvml = fake()
    profiler = profiler_with("no", tmp_path)
    GpuSetup(profiler).ensure()
    assert sum(nvml.calls.values()) == 0
    assert profiler.listeners == [] and profiler.collectors == [] and profiler.session.notes == []


def test_setup_auto_without_gpu_registers_nothing_and_notes_once(fake, tmp_path: Path) -> None:
    nvml = fake(init_error=NVML_ERROR_DRIVER_NOT_LOADED)
    profiler = profiler_with("auto", tmp_path)
    setup = GpuSetup(profiler)
    setup.ensure()
    setup.ensure()
    assert nvml.calls["nvmlInit"] == 1
    assert profiler.listeners == [] and profiler.collectors == []
    assert profiler.session.notes == ["GPU columns absent: the NVIDIA driver is not loaded"]


def test_setup_yes_without_gpu_is_a_usage_error(fake, tmp_path: Path) -> None:
    fake(devices=0)
    with pytest.raises(pytest.UsageError, match="--profile-gpu=yes, but .*found no NVIDIA GPU"):
        GpuSetup(profiler_with("yes", tmp_path)).ensure()


def test_setup_with_gpu_registers_one_sampler(fake, tmp_path: Path) -> None:
    nvml = fake(util_error=NVML_ERROR_NOT_SUPPORTED)
    profiler = profiler_with("auto", tmp_path)
    setup = GpuSetup(profiler)
    setup.ensure()
    assert len(profiler.listeners) == 1 and profiler.collectors == profiler.listeners
    assert "gpu_util_percent absent" in profiler.session.notes[0]
    setup.close()
    assert nvml.calls["nvmlShutdown"] == 1


def test_missing_driver_is_found_without_importing_pynvml(monkeypatch) -> None:
    """Importing pynvml costs ~30 ms: where the driver library is missing it is not imported."""
    pytest.importorskip("pynvml")
    monkeypatch.delitem(sys.modules, "pynvml", raising=False)
    try:
        open_nvml().close()
    except GpuUnavailable as exc:
        if "libnvidia-ml.so.1" not in exc.reason:
            raise
        assert "pynvml" not in sys.modules
    else:
        pytest.skip("an NVIDIA driver is installed: this test is for machines without one")


def test_a_run_that_profiles_nothing_never_loads_nvml(fake, pytester: pytest.Pytester) -> None:
    """--profile-gpu=auto waits for the first profiled test: without one, NVML stays unloaded."""
    nvml = fake()
    pytester.makepyfile("def test_plain():\n    pass\n")
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
    assert sum(nvml.calls.values()) == 0
