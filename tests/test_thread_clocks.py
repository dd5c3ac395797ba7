"""The threads as the samplers read them (sampling/threads.py, the A/B worker): a thread that
has ended reads None, never a crash (pthread_getcpuclockid(ident) read the ended thread's
pthread struct in its unmapped stack: SIGSEGV, in the middle of a user's test); reading the
threads' frames never hangs the process."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time

import pytest

from pytest_scalene.compare_ref import worker_sampler
from pytest_scalene.sampling import threads

READERS = {"cpu_sampler": threads.thread_cpu, "ab_worker": worker_sampler.thread_cpu_s}


@pytest.mark.parametrize("module", ["cpu_sampler", "ab_worker"])
def test_an_ended_threads_clock_reads_none_instead_of_crashing(module: str) -> None:
    where = {
        "cpu_sampler": "from pytest_scalene.sampling.threads import thread_cpu as read",
        "ab_worker": "from pytest_scalene.compare_ref.worker_sampler import thread_cpu_s as read",
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


# Threads that keep making frames, and cycles whose collection runs threading.local's dealloc
# (it takes the runtime's list of threads): a collection that starts inside
# sys._current_frames() deadlocks on 3.11 (hung within seconds here without the pause).
DEADLOCK = """
import gc, sys, threading, time
{where}
stop = threading.Event()
def leaf(n):
    return n + 1
def work():
    while not stop.is_set():
        for i in range(100):
            leaf(i)
threads = [threading.Thread(target=work) for _ in range(3)]
for t in threads:
    t.start()
class Cycle:
    def __init__(self):
        self.me = self
        self.local = threading.local()
gc.set_threshold(1)
start = time.monotonic()
while time.monotonic() - start < 3:
    Cycle()
    frames = read()
stop.set()
print("read", len(frames), "gc", gc.isenabled())
"""


@pytest.mark.skipif(
    sys.version_info >= (3, 12), reason="since 3.12 the collector runs only between bytecodes"
)
@pytest.mark.parametrize("module", ["threads", "ab_worker"])
def test_reading_the_frames_never_hangs(module: str) -> None:
    where = {
        "threads": "from pytest_scalene.sampling.threads import current_frames as read",
        "ab_worker": "from pytest_scalene.compare_ref.worker_sampler import current_frames as read",
    }[module]
    code = DEADLOCK.format(where=where)
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("reading the frames hung the process (a collection inside it)")
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert done.stdout.decode().startswith("read 4 gc True"), done.stdout
