"""A fake `pynvml` for the GPU tests: the functions pytest-scalene calls, with settable state.

`FakeNvml(...).module` goes into sys.modules["pynvml"]. Error codes are pynvml's own numbers.
Tests change `state` between samples; `calls` counts every function called.
"""

from __future__ import annotations

import os
import types
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

NVML_SUCCESS = 0
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_FEATURE_DISABLED = 0
NVML_FEATURE_ENABLED = 1
MB = 2**20


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


@dataclass
class Proc:
    pid: int
    usedGpuMemory: int | None  # noqa: N815 (pynvml's name)


@dataclass
class Handle:
    index: int


@dataclass
class FakeNvml:
    """State of the fake driver. `processes`: per device, a list of (pid, bytes or None); the
    default lists this process with `process_mb` on device 0."""

    devices: int = 1
    util: float = 0.0
    process_mb: float = 0.0
    other_mb: float = 1000.0  # other processes' use of each device
    device_used_mb: float | None = None  # None: other_mb + what the process list holds
    processes: list[list[tuple[int, int | None]]] | None = None
    init_error: int | None = None
    util_error: int | None = None  # e.g. NOT_SUPPORTED (MIG)
    process_list_error: int | None = None  # e.g. NOT_SUPPORTED: no per-process memory
    accounting: bool = False
    high_water_mb: float = 0.0  # accounting's maxMemoryUsage for this process
    read_error: int | None = None  # raised by every read once set (a GPU that falls off)
    calls: Counter[str] = field(default_factory=Counter)

    @property
    def module(self) -> types.ModuleType:
        mod = types.ModuleType("pynvml")
        for name, value in globals().items():
            if name.startswith("NVML_"):
                setattr(mod, name, value)
        mod.NVMLError = NVMLError
        for name in dir(self):
            if name.startswith("nvml"):
                setattr(mod, name, getattr(self, name))
        mod.state = self
        return mod

    def _call(self, name: str, error: int | None = None) -> None:
        self.calls[name] += 1
        if error is not None:
            raise NVMLError(error)

    def nvmlInit(self) -> None:  # noqa: N802 (pynvml's names)
        self._call("nvmlInit", self.init_error)

    def nvmlShutdown(self) -> None:  # noqa: N802
        self._call("nvmlShutdown")

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        self._call("nvmlDeviceGetCount")
        return self.devices

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Handle:  # noqa: N802
        self._call("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < self.devices:
            raise NVMLError(2)
        return Handle(index)

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> Handle:  # noqa: N802
        self._call("nvmlDeviceGetHandleByUUID")
        return Handle(int(uuid.rsplit("-", 1)[1]))

    def nvmlDeviceGetName(self, handle: Handle) -> str:  # noqa: N802
        self._call("nvmlDeviceGetName")
        return f"Fake GPU {handle.index}"

    def nvmlDeviceGetUtilizationRates(self, handle: Handle) -> Any:  # noqa: N802
        self._call("nvmlDeviceGetUtilizationRates", self.util_error or self.read_error)
        return types.SimpleNamespace(gpu=self.util, memory=0)

    def nvmlDeviceGetMemoryInfo(self, handle: Handle) -> Any:  # noqa: N802
        self._call("nvmlDeviceGetMemoryInfo", self.read_error)
        if self.device_used_mb is not None:
            used = int(self.device_used_mb * MB)
        else:
            listed = sum(used or 0 for _, used in self._listed(handle))
            used = int(self.other_mb * MB) + listed
        return types.SimpleNamespace(total=80 * 1024 * MB, used=used, free=80 * 1024 * MB - used)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Handle) -> list[Proc]:  # noqa: N802
        self._call("nvmlDeviceGetComputeRunningProcesses", self.process_list_error)
        if self.read_error is not None:
            raise NVMLError(self.read_error)
        return [Proc(pid, used) for pid, used in self._listed(handle)]

    def _listed(self, handle: Handle) -> list[tuple[int, int | None]]:
        if self.processes is not None:
            return self.processes[handle.index]
        return [(os.getpid(), int(self.process_mb * MB))] if handle.index == 0 else []

    def nvmlDeviceGetAccountingMode(self, handle: Handle) -> int:  # noqa: N802
        self._call("nvmlDeviceGetAccountingMode")
        return NVML_FEATURE_ENABLED if self.accounting else NVML_FEATURE_DISABLED

    def nvmlDeviceGetAccountingStats(self, handle: Handle, pid: int) -> Any:  # noqa: N802
        self._call("nvmlDeviceGetAccountingStats")
        if not self.accounting:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        if handle.index != 0 or pid != os.getpid():
            raise NVMLError(NVML_ERROR_NOT_FOUND)
        return types.SimpleNamespace(maxMemoryUsage=int(self.high_water_mb * MB))
