"""The process's resident set size, for the memory sampler (memory_sampler.py)."""

from __future__ import annotations

import os


class Resident:
    """The process's resident set (RSS) from /proc: its peak growth over a test, exactly, from
    the kernel's high-water mark (VmHWM, reset per test through /proc/self/clear_refs), and its
    changes between CPU samples. Absent (None) where /proc cannot tell."""

    def __init__(self) -> None:
        self._page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
        self._statm: int | None = None
        self._pid = 0
        self._base: int | None = None
        self._last = 0
        self._peak = 0
        self._hwm_reset = False

    def _now(self) -> int | None:
        try:
            if self._statm is None or self._pid != os.getpid():  # a fork child: its own file
                self._statm = os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC)
                self._pid = os.getpid()
            return int(os.pread(self._statm, 128, 0).split()[1]) * self._page
        except (OSError, ValueError, IndexError):
            return None

    def start(self) -> None:
        try:  # "5": reset the peak resident size to the current one (Linux >= 4.0)
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            self._hwm_reset = True
        except OSError:
            self._hwm_reset = False
        self._base = self._now()
        self._last = self._peak = self._base or 0

    def step(self) -> int:
        """Resident bytes gained (or lost: negative) since the last call."""
        now = self._now()
        if now is None:
            return 0
        grown, self._last = now - self._last, now
        self._peak = max(self._peak, now)
        return grown

    def peak_growth(self) -> int | None:
        if self._base is None:
            return None
        self.step()
        peak = self._peak
        if self._hwm_reset:
            try:
                with open("/proc/self/status") as f:
                    for row in f:
                        if row.startswith("VmHWM:"):
                            peak = max(peak, int(row.split()[1]) * 1024)
                            break
            except (OSError, ValueError, IndexError):
                pass
        return peak - self._base
