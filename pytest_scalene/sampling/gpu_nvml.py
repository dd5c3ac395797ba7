"""NVML access for the GPU sampler: find the devices once, then read them cheaply.

`open_nvml()` initialises NVML (pynvml, from the nvidia-ml-py package) and caches the device
handles, or raises `GpuUnavailable` with a reason a user can act on. `NvmlDevices.read()` is
called from the CPU sampler's signal handler, so it does no discovery, only the reads.

Memory is this process's (and its children's) when NVML's process list lets us find it: the
driver lists processes by host PID, so inside a container's PID namespace our own entry cannot be
recognised and the device total (all processes) is used instead, flagged as scope "device".
Utilisation is always the device's: NVML has no cheap per-process, per-moment figure.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
from types import ModuleType
from typing import Any, NamedTuple

LIBRARY = "libnvidia-ml.so.1"
NO_LIBRARY = f"the NVIDIA driver library ({LIBRARY}) was not found: no NVIDIA driver is installed"

# Reasons the device total is used instead of this process's memory (one note each).
HIDDEN_PIDS = (
    "NVML lists GPU processes whose PIDs this process cannot see (a container's PID namespace), "
    "so its own share is unknown"
)
NO_PROCESS_MEMORY = "NVML does not report per-process GPU memory on this system"


class GpuUnavailable(Exception):
    """No usable GPU; `reason` says why (shown once in the report, or in the UsageError)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Reading(NamedTuple):
    util_percent: float | None  # None where the device does not report utilisation (e.g. MIG)
    used_bytes: int
    scope: str  # "process": this process and its children; "device": every process on it
    why_device: str | None = None  # set when scope is "device"


def _error_reason(nvml: ModuleType, exc: BaseException) -> str:
    code = getattr(exc, "value", None)
    known = {
        "NVML_ERROR_LIBRARY_NOT_FOUND": NO_LIBRARY,
        "NVML_ERROR_DRIVER_NOT_LOADED": "the NVIDIA driver is not loaded",
        "NVML_ERROR_NO_PERMISSION": "no permission to query the GPU through NVML",
        "NVML_ERROR_LIB_RM_VERSION_MISMATCH": "the NVIDIA driver library and kernel module "
        "versions differ (reload the driver or reboot)",
        "NVML_ERROR_FUNCTION_NOT_FOUND": "the NVIDIA driver is too old for this pynvml",
        "NVML_ERROR_GPU_IS_LOST": "the GPU has fallen off the bus",
    }
    for name, reason in known.items():
        if code is not None and code == getattr(nvml, name, object()):
            return reason
    return f"NVML error: {exc}"


def _is_error(nvml: ModuleType, exc: BaseException, *names: str) -> bool:
    code = getattr(exc, "value", None)
    return any(code == getattr(nvml, name, object()) for name in names)


def _select_handles(nvml: ModuleType) -> list[Any]:
    """The devices this process may use: CUDA_VISIBLE_DEVICES when set, else all of them."""
    count = nvml.nvmlDeviceGetCount()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        if count == 0:
            raise GpuUnavailable("NVML found no NVIDIA GPU")
        return [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    handles = []
    for entry in (e.strip() for e in visible.split(",")):
        # CUDA stops at the first invalid entry; so do we.
        if entry.startswith(("GPU-", "MIG-")):
            handles.append(nvml.nvmlDeviceGetHandleByUUID(entry))
        elif entry.isascii() and entry.isdigit() and int(entry) < count:  # not '²' or '٣'
            handles.append(nvml.nvmlDeviceGetHandleByIndex(int(entry)))
        else:
            break
    if not handles:
        raise GpuUnavailable(f"CUDA_VISIBLE_DEVICES={visible!r} leaves no GPU to this process")
    return handles


def _parent_pid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read()
    except OSError:
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
    fields = text[text.rfind(b")") + 2 :].split()
    return int(fields[1]) if len(fields) > 1 else None


class NvmlDevices:
    """The selected devices, their cached handles, and what the driver lets us read."""

    def __init__(self, nvml: ModuleType, handles: list[Any]) -> None:
        self.nvml = nvml
        self.handles = handles
        self.names = [_name(nvml, h) for h in handles]
        self.pid = os.getpid()
        self.util_supported = self._probe_util()
        self.per_process, self.why_device = self._probe_process_list()
        self.accounting = self.per_process and self._probe_accounting()
        self._relation: dict[int, str] = {}
        self._used_at_listing: list[int] | None = None
        self._process_memory: tuple[int | None, str | None] = (None, None)

    def _probe_util(self) -> bool:
        try:
            for handle in self.handles:
                self.nvml.nvmlDeviceGetUtilizationRates(handle)
        except self.nvml.NVMLError as exc:
            if _is_error(self.nvml, exc, "NVML_ERROR_NOT_SUPPORTED"):
                return False  # MIG instances and some vGPUs
            raise
        return True

    def _probe_process_list(self) -> tuple[bool, str | None]:
        try:
            for handle in self.handles:
                self.nvml.nvmlDeviceGetComputeRunningProcesses(handle)
        except Exception as exc:  # NOT_SUPPORTED, NO_PERMISSION, or a pynvml/driver mismatch
            return False, f"{NO_PROCESS_MEMORY} ({exc})"
        return True, None

    def _probe_accounting(self) -> bool:
        """Per-process accounting (root enables it: `nvidia-smi -am 1`) keeps each process's
        exact memory high-water mark; we use it for the test's peak."""
        enabled = getattr(self.nvml, "NVML_FEATURE_ENABLED", 1)
        try:
            return all(self.nvml.nvmlDeviceGetAccountingMode(h) == enabled for h in self.handles)
        except Exception:
            return False

    def forget_processes(self) -> None:
        """PIDs are reused: what we know of processes is kept for one test only."""
        self._relation.clear()
        self._used_at_listing = None

    def _relation_of(self, pid: int) -> str:
        """How `pid` relates to us: ours (this process or a descendant), other, or hidden (not
        in our /proc: another PID namespace)."""
        relation = self._relation.get(pid)
        if relation is None:
            relation = "hidden" if not os.path.exists(f"/proc/{pid}") else "other"
            current: int | None = pid
            for _ in range(64):  # a bounded walk up the parent chain
                if current == self.pid:
                    relation = "ours"
                    break
                if current is None or current <= 1:
                    break
                current = _parent_pid(current)
            self._relation[pid] = relation
        return relation

    def _process_bytes(self) -> tuple[int | None, str | None]:
        ours, hidden = 0, False
        for handle in self.handles:
            for proc in self.nvml.nvmlDeviceGetComputeRunningProcesses(handle):
                relation = self._relation_of(proc.pid)
                if relation == "ours":
                    if proc.usedGpuMemory is None:  # NVML_VALUE_NOT_AVAILABLE
                        return None, NO_PROCESS_MEMORY
                    ours += proc.usedGpuMemory
                elif relation == "hidden":
                    hidden = True
        if hidden and ours == 0:
            return None, HIDDEN_PIDS
        return ours, None

    def read(self) -> Reading:
        nvml, handles = self.nvml, self.handles
        util = None
        if self.util_supported:
            util = sum(nvml.nvmlDeviceGetUtilizationRates(h).gpu for h in handles) / len(handles)
        device_used = [nvml.nvmlDeviceGetMemoryInfo(h).used for h in handles]
        used, why = None, self.why_device
        if self.per_process:
            # The process list is the slow call: read it again only when the devices' used
            # memory moved, since our share cannot change without moving the total.
            if device_used != self._used_at_listing:
                self._process_memory = self._process_bytes()
                self._used_at_listing = device_used
            used, why = self._process_memory
        if used is not None:
            return Reading(util, used, "process")
        return Reading(util, sum(device_used), "device", why)

    def high_water_bytes(self) -> int | None:
        """This process's highest GPU memory since it started (per-process accounting), or
        None where accounting is off."""
        if not self.accounting:
            return None
        total = 0
        for handle in self.handles:
            try:
                peak = self.nvml.nvmlDeviceGetAccountingStats(handle, self.pid).maxMemoryUsage
            except self.nvml.NVMLError as exc:
                if _is_error(self.nvml, exc, "NVML_ERROR_NOT_FOUND"):
                    continue  # this process never used that device
                raise
            if peak is None:
                return None
            total += peak
        return total

    def close(self) -> None:
        _shutdown(self.nvml)


def _name(nvml: ModuleType, handle: Any) -> str:
    try:
        name = nvml.nvmlDeviceGetName(handle)
    except Exception:
        return "unknown NVIDIA GPU"
    return name.decode() if isinstance(name, bytes) else str(name)


def _import_pynvml() -> ModuleType:
    """pynvml, or GpuUnavailable. Importing it takes ~30 ms, so where it is not imported yet and
    the driver library cannot be loaded (most machines), we say so without importing it."""
    not_installed = GpuUnavailable("pynvml is not installed (pip install 'pytest-scalene[gpu]')")
    if "pynvml" not in sys.modules:
        if importlib.util.find_spec("pynvml") is None:
            raise not_installed
        if sys.platform.startswith("linux"):
            # What pynvml loads, as ctypes.CDLL loads it; cheap where it is missing. _ctypes
            # alone: importing ctypes took every profiling session 2 ms, _ctypes 0.7 ms.
            try:
                import _ctypes
            except ImportError:  # an interpreter built without ctypes: pynvml needs it too
                raise GpuUnavailable("this Python has no ctypes, which pynvml needs") from None
            try:
                _ctypes.dlopen(LIBRARY, os.RTLD_NOW | os.RTLD_LOCAL)
            except OSError:
                raise GpuUnavailable(NO_LIBRARY) from None
    try:
        import pynvml
    except ImportError:
        raise not_installed from None
    return pynvml


def open_nvml() -> NvmlDevices:
    """Initialise NVML and select the devices, or raise GpuUnavailable saying why."""
    nvml = _import_pynvml()
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        raise GpuUnavailable(_error_reason(nvml, exc)) from None
    except Exception as exc:
        raise GpuUnavailable(f"NVML could not be initialised: {exc!r}") from None
    try:
        devices = NvmlDevices(nvml, _select_handles(nvml))
        devices.read()  # memory must be readable, or there is nothing to report
        return devices
    except GpuUnavailable:
        _shutdown(nvml)
        raise
    except nvml.NVMLError as exc:
        _shutdown(nvml)
        raise GpuUnavailable(_error_reason(nvml, exc)) from None
    except Exception as exc:  # e.g. a pynvml that does not match the driver
        _shutdown(nvml)
        raise GpuUnavailable(f"NVML could not be queried: {exc!r}") from None


def _shutdown(nvml: ModuleType) -> None:
    # At exit, or NVML half-initialised where the reason we give is the original error.
    with contextlib.suppress(Exception):
        nvml.nvmlShutdown()
