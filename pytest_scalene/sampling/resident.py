"""The process's resident set size, for the memory sampler (memory_sampler.py)."""

from __future__ import annotations

import os

from ..core.after_fork import run_in_fork_child

try:
    from .. import _resident_calls as calls  # type: ignore[attr-defined]
except ImportError:  # an in-tree checkout without the build: no resident figures

    class calls:  # type: ignore[no-redef]
        """Stands in for native/resident_calls.c: each reading absent."""

        start = staticmethod(lambda clear_refs, statm, page: (False, None, 0))
        resident = staticmethod(lambda statm, page: None)
        maxrss = staticmethod(lambda: 0)


# Pages the resident set may grow between the peak's reset and the reading that checks it.
MAXRSS_SLACK_PAGES = 16


# Bumped in each fork() child: a descriptor of /proc/self opened before the fork names the
# parent's files (os.getpid() at every read was two system calls a test).
_forks = 0


def _count_fork() -> None:
    global _forks
    _forks += 1


run_in_fork_child(_count_fork)


class Resident:
    """The process's resident set (RSS) from /proc: its peak growth over a test, exactly, from
    the kernel's high-water mark (reset per test through /proc/self/clear_refs; read as
    getrusage's ru_maxrss, or VmHWM where that holds an older mark), and its
    changes between CPU samples. Absent (None) where /proc cannot tell."""

    def __init__(self) -> None:
        self._page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
        self._files: dict[str, int] = {}  # /proc/self/<name> -> its descriptor, kept open
        self._forks = -1
        self._clear_refs = self._statm = -1  # the two files of every test: -1, not open
        self._base: int | None = None
        self._last = 0
        self._peak = 0
        self._hwm_reset = False
        self._maxrss_tracks = False

    def _file(self, name: str, flags: int) -> int:
        """The descriptor of /proc/self/`name`, opened once (a test's start and end read and
        write these files: opening them each time was 30 us a test of the per-test cost), -1
        where it cannot be; a fork child opens its own, since /proc/self resolved to its
        parent's."""
        if self._forks != _forks:
            self._files, self._forks = {}, _forks
        found = self._files.get(name)
        if found is None:
            try:
                found = os.open(f"/proc/self/{name}", flags | os.O_CLOEXEC)
            except OSError:
                found = -1
            self._files[name] = found
        return found

    def _open_per_test_files(self) -> None:
        """clear_refs and statm, opened at the first test and again in a fork child."""
        self._clear_refs = self._file("clear_refs", os.O_WRONLY)
        self._statm = self._file("statm", os.O_RDONLY)

    def start(self) -> None:
        if self._forks != _forks:
            self._open_per_test_files()
        # "5" resets the peak resident size to the current one (Linux >= 4.0); one C call
        # (native/resident_calls.c) then reads the resident size and getrusage's ru_maxrss.
        self._hwm_reset, self._base, maxrss = calls.start(self._clear_refs, self._statm, self._page)
        self._last = self._peak = self._base or 0
        # getrusage's ru_maxrss reads the same high-water mark as VmHWM, for 1 us instead of the
        # 9 us of generating /proc/self/status, but it is the larger of that mark and the one
        # recorded at exec: usable only while the latter is below the reset mark.
        self._maxrss_tracks = (
            self._hwm_reset
            and self._base is not None
            and maxrss <= self._base + MAXRSS_SLACK_PAGES * self._page
        )

    def step(self) -> int:
        """Resident bytes gained (or lost: negative) since the last call."""
        if self._forks != _forks:  # a fork child, before its first test's start
            self._open_per_test_files()
        now = calls.resident(self._statm, self._page)
        if now is None:
            return 0
        grown, self._last = now - self._last, now
        self._peak = max(self._peak, now)
        return grown

    def peak_growth(self) -> int | None:
        if self._base is None:
            return None
        if self._maxrss_tracks:  # the exact mark: above every reading step() could take
            return max(self._peak, calls.maxrss()) - self._base
        self.step()
        peak = self._peak
        if self._hwm_reset:
            try:  # a read at offset 0 has the kernel write the file afresh
                status = os.pread(self._file("status", os.O_RDONLY), 16384, 0)
                at = status.index(b"VmHWM:") + len(b"VmHWM:")
                peak = max(peak, int(status[at : status.index(b"\n", at)].split()[0]) * 1024)
            except (OSError, ValueError, IndexError):
                pass
        return peak - self._base
