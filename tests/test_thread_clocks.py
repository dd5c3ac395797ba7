"""The per-thread CPU clocks the samplers read (sampling/cpu_sampler.py, the A/B worker): a
thread that has ended reads None, never a crash. pthread_getcpuclockid(ident) read the ended
thread's pthread struct in its unmapped stack: SIGSEGV, in the middle of a user's test."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time

import pytest

from pytest_scalene.ab import worker_sampler
from pytest_scalene.sampling import cpu_sampler

READERS = {"cpu_sampler": cpu_sampler._thread_cpu, "ab_worker": worker_sampler.thread_cpu_s}


@pytest.mark.parametrize("module", ["cpu_sampler", "ab_worker"])
def test_an_ended_threads_clock_reads_none_instead_of_crashing(module: str) -> None:
    where = {
        "cpu_sampler": "from pytest_scalene.sampling.cpu_sampler import _thread_cpu as read",
        "ab_worker": "from pytest_scalene.ab.worker_sampler import thread_cpu_s as read",
    }[module]
    # Large stacks: glibc caches 40 MB of ended threads' stacks and unmaps the rest.
    script = textwrap.dedent(
        f"""
        import threading, time
        {where}
        threading.stack_size(64 << 20)
        idents = []
        def work():
            idents.append(threading.get_ident())
        for _ in range(40):
            thread = threading.Thread(target=work)
            thread.start()
            thread.join()
        time.sleep(0.1)
        print(sorted({{read(ident) for ident in idents}}, key=str))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[None]"


@pytest.mark.parametrize("module", sorted(READERS))
def test_a_live_threads_clock_is_its_cpu_time(module: str) -> None:
    read = READERS[module]
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            sum(range(1000))

    thread = threading.Thread(target=spin)
    thread.start()
    try:
        time.sleep(0.3)
        assert thread.ident is not None
        mine = read(thread.ident)
        theirs = time.clock_gettime(time.pthread_getcpuclockid(thread.ident))  # alive: safe
        assert mine is not None and mine > 0.01
        assert abs(mine - theirs) < 0.05
        assert read(threading.get_ident()) == pytest.approx(time.thread_time(), abs=0.05)
    finally:
        stop.set()
        thread.join()
    assert read(-12345) is None  # not a thread of this process
