"""The resident-set reader (sampling/resident.py) keeps its /proc files open between tests: a
fork child must read its own, not the parent's through the descriptors it inherited."""

from __future__ import annotations

import os
import resource
import sys

import pytest

from pytest_scalene.sampling import resident as resident_module
from pytest_scalene.sampling.resident import Resident

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads /proc/self (Linux)"
)
MB = 1 << 20


def _touch(megabytes: int) -> bytearray:
    block = bytearray(megabytes * MB)
    block[::4096] = b"\1" * len(block[::4096])  # every page resident
    return block


def test_the_peak_is_the_tests_and_is_reset_at_each_start():
    resident = Resident()
    resident.start()
    block = _touch(64)
    del block  # the peak stays
    first = resident.peak_growth()
    resident.start()  # the next test: the high-water mark starts again from here
    second = resident.peak_growth()
    assert first is not None and second is not None
    assert first >= 60 * MB, first
    assert second < 8 * MB, second


def test_the_peak_comes_from_proc_when_getrusage_holds_an_older_mark(monkeypatch):
    # ru_maxrss is the larger of the reset mark and the one recorded at exec (a big parent):
    # above the resident set at the reset, it cannot tell the test's peak.
    real = resident_module.calls

    class OlderMark:  # the C reads, with ru_maxrss far above the test's resident set
        @staticmethod
        def start(*fds: int) -> tuple[bool, int | None, int]:
            reset, resident, _maxrss = real.start(*fds)
            return reset, resident, 1 << 50

        resident = staticmethod(real.resident)
        maxrss = staticmethod(lambda: 1 << 50)

    monkeypatch.setattr(resident_module, "calls", OlderMark)
    resident = Resident()
    resident.start()
    block = _touch(64)
    del block
    grown = resident.peak_growth()
    assert grown is not None and 60 * MB <= grown < 80 * MB, grown


def test_a_fork_child_reads_its_own_resident_set():
    resident = Resident()
    resident.start()
    resident.peak_growth()  # the parent's three files are open from here on
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its own 64 MB, and a reset of its own high-water mark
        try:
            resident.start()
            block = _touch(64)
            os.write(write, str(resident.peak_growth()).encode())
            del block
        finally:
            os._exit(0)
    os.close(write)
    child = int(os.read(read, 64) or b"-1")
    os.close(read)
    os.waitpid(pid, 0)
    assert child >= 60 * MB, child  # through the parent's files it read the parent: ~0


def test_the_c_reads_match_proc_and_getrusage():
    calls = resident_module.calls
    page = os.sysconf("SC_PAGE_SIZE")
    statm = os.open("/proc/self/statm", os.O_RDONLY)
    clear_refs = os.open("/proc/self/clear_refs", os.O_WRONLY)
    try:
        block = _touch(32)  # the resident size moves by far more than the reads' own pages
        with open("/proc/self/statm") as text:
            expected = int(text.read().split()[1]) * page
        reset, resident, maxrss = calls.start(clear_refs, statm, page)
        assert reset is True
        assert resident is not None and abs(resident - expected) < 4 * MB, (resident, expected)
        del block
        now = calls.resident(statm, page)
        assert now is not None and now < resident - 24 * MB, (now, resident)
        # The high-water mark holds the 32 MB (the kernel syncs its counters lazily: a page's
        # slack), and is getrusage's figure in bytes.
        assert calls.maxrss() >= resident - MB
        assert calls.maxrss() // 1024 == resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    finally:
        os.close(statm)
        os.close(clear_refs)
    # Files that could not be opened (-1): no reset and no reading, said as such.
    reset, resident, maxrss = calls.start(-1, -1, page)
    assert (reset, resident) == (False, None) and maxrss > 0
    assert calls.resident(-1, page) is None
