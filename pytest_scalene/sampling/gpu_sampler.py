"""GPU utilisation and memory per line: NVML is read at each CPU sample, on the sampler's own
schedule, and the reading is charged to the line the main thread is on.

Line keys: `gpu_util_percent` (mean device utilisation over the samples at the line) and
`gpu_peak_mb` (highest GPU memory in use at those samples). Test keys: `gpu_peak_mb` and
`gpu_memory_scope` ("process" or "device", see gpu_nvml). GPU sampling is kept under
TIME_BUDGET of the test's wall time: where NVML is slow, the last reading is reused.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING

import pytest

from ..core import extra_keys
from ..core.model import LineKey, TestProfile
from .profiler import Profiler
from .scope import CodeScope

if TYPE_CHECKING:  # NVML's module is imported at the first profiled test, unless --profile-gpu=no
    from .gpu_nvml import NvmlDevices, Reading

TIME_BUDGET = 0.005  # GPU sampling may use at most 0.5% of a test's wall time
MB = 2**20  # gpu_peak_mb is in MiB, like the other *_mb figures


class GpuSampler:
    """A SampleListener (reads NVML at each CPU sample) and a Collector (per-test start/stop)."""

    def __init__(
        self,
        devices: NvmlDevices,
        scope: CodeScope,
        note: Callable[[str], None],
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.devices = devices
        self.scope = scope
        self.note = note
        self.clock = clock
        self.broken = False
        self._last: Reading | None = None
        self._read_at: LineKey | None = None  # the line the last reading was taken at
        self._began = self._spent = self._read_s = 0.0
        self._reads = self._reuses = 0
        self._high_water_at_start: int | None = None
        self._util_samples: dict[tuple[str, LineKey], int] = {}
        self._said: set[str | None] = set()

    # -- Collector ---------------------------------------------------------------------------
    def start_test(self, profile: TestProfile) -> None:
        if self.broken:
            return
        try:
            self.devices.forget_processes()
            self._high_water_at_start = self.devices.high_water_bytes()
            self._read(profile)  # the memory already in use counts towards the test's peak
        except Exception as exc:
            self._stop(exc)
        self._began, self._spent, self._read_s = self.clock(), 0.0, 0.0
        self._reads = self._reuses = 0
        self._read_at = None  # the start's reading belongs to no line

    def stop_test(self, profile: TestProfile) -> None:
        if self.broken:
            return
        try:
            self._finish(profile)
        except Exception as exc:
            self._stop(exc)

    def _finish(self, profile: TestProfile) -> None:
        self._read(profile)
        high_water = self.devices.high_water_bytes()
        start = self._high_water_at_start
        # The driver's high-water mark catches a peak between two samples; it is this
        # process's lifetime maximum, so it tells about this test only if it rose during it.
        if (
            high_water is not None
            and start is not None
            and high_water > start
            and profile.extra.get(extra_keys.GPU_MEMORY_SCOPE) == "process"
        ):
            profile.extra[extra_keys.GPU_PEAK_MB] = max(
                profile.extra[extra_keys.GPU_PEAK_MB], high_water / MB
            )
        if self._reads and self._reuses > self._reads:
            cost_us = 1e6 * self._read_s / self._reads
            self.note(
                f"NVML reads are slow here (~{cost_us:.0f} us each): GPU figures were refreshed "
                f"less often than the CPU samples, to keep their cost under {TIME_BUDGET:.1%}"
            )

    # -- SampleListener ----------------------------------------------------------------------
    def on_cpu_sample(
        self, profile: TestProfile, frame: FrameType | None, key: LineKey | None, cpu_s: float
    ) -> None:
        if self.broken:
            return
        try:
            now = self.clock()
            reading: Reading | None = self._last
            if reading is None or self._spent <= TIME_BUDGET * (now - self._began):
                reading = self._read(profile)
                self._reads += 1
                self._read_s += self.clock() - now
                self._read_at = key
            else:
                self._reuses += 1
                # An older reading stands in only for the line it was taken at: charged to
                # another line it would put one line's memory on the next.
                if key != self._read_at:
                    reading = None
            if key is not None and reading is not None:
                self._charge(profile, frame, key, reading)
            self._spent += self.clock() - now
        except Exception as exc:  # an exception here would stop the CPU sampler too
            self._stop(exc)

    def _stop(self, exc: Exception) -> None:
        self.broken = True
        self.note(f"GPU sampling stopped after an NVML error: {exc!r}")

    # -- internals ---------------------------------------------------------------------------
    def _read(self, profile: TestProfile) -> Reading:
        reading = self._last = self.devices.read()
        extra = profile.extra
        used_mb = reading.used_bytes / MB
        if used_mb > extra.get(extra_keys.GPU_PEAK_MB, -1.0):
            extra[extra_keys.GPU_PEAK_MB] = used_mb
        if reading.scope == "device":
            extra[extra_keys.GPU_MEMORY_SCOPE] = "device"
            if reading.why_device not in self._said:  # said once, not at every sample
                self._said.add(reading.why_device)
                names = ", ".join(sorted(set(self.devices.names)))
                self.note(
                    f"gpu_peak_mb of tests with gpu_memory_scope 'device' is the used memory of "
                    f"the whole device ({names}), every process included: {reading.why_device}"
                )
        else:
            extra.setdefault(extra_keys.GPU_MEMORY_SCOPE, "process")
        return reading

    def _charge(
        self, profile: TestProfile, frame: FrameType | None, key: LineKey, reading: Reading
    ) -> None:
        stats = profile.lines.get(key)
        if stats is None:  # the CPU sampler charged nothing to this line this time
            located = self.scope.locate(frame)
            stats = profile.line(key, located[1] if located else 0)
        extra = stats.extra
        if reading.util_percent is not None:
            count_key = (profile.nodeid, key)
            count = self._util_samples[count_key] = self._util_samples.get(count_key, 0) + 1
            mean = extra.get(extra_keys.GPU_UTIL_PERCENT, 0.0)
            extra[extra_keys.GPU_UTIL_PERCENT] = mean + (reading.util_percent - mean) / count
        used_mb = reading.used_bytes / MB
        if used_mb > extra.get(extra_keys.GPU_PEAK_MB, -1.0):
            extra[extra_keys.GPU_PEAK_MB] = used_mb


class GpuSetup:
    """Decides once per session whether GPU sampling runs, and registers it on the Profiler.

    Probing loads NVML, so it waits for the first profiled test (`--profile-gpu=auto`) or
    happens at start-up (`yes`, where a missing GPU is a usage error)."""

    def __init__(self, profiler: Profiler) -> None:
        self.profiler = profiler
        self.devices: NvmlDevices | None = None
        self._decided = False

    def ensure(self) -> None:
        if self._decided:
            return
        self._decided = True
        mode = self.profiler.options.gpu
        if mode == "no":
            return
        from .gpu_nvml import GpuUnavailable, open_nvml

        try:
            devices = open_nvml()
        except GpuUnavailable as exc:
            if mode == "yes":
                raise pytest.UsageError(
                    f"--profile-gpu=yes, but no GPU can be profiled: {exc.reason}"
                ) from None
            self.profiler.note(f"GPU columns absent: {exc.reason}")
            return
        self.devices = devices
        if not devices.util_supported:
            self.profiler.note(
                "gpu_util_percent absent: the GPU reports no utilisation (a MIG instance or vGPU)"
            )
        sampler = GpuSampler(devices, self.profiler.scope, self.profiler.note)
        self.profiler.collectors.append(sampler)
        self.profiler.listeners.append(sampler)

    def close(self) -> None:
        if self.devices is not None:
            self.devices.close()
            self.devices = None
