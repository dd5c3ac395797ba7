"""The main thread's Python/native split on a CPU the test shares with other processes.

CPython runs the timer's handler between bytecodes, so a late handler means native code held it
back (signal_delay.py); but the kernel checks CPU timers only at its ticks, on a CPU running the
process, and with its slices cut short by other processes a tick can miss the expiry for several
milliseconds whatever ran. Measured from the expiry, the delay made a pure-Python loop sharing
one CPU with one busy process read 3-19% Python (four tests; 95-100% on its own). Measured from
the delivery (a C handler stamps it with the main thread's CPU clock, native/timer_calls.c),
the lag is no handler's delay: the loop reads mostly Python and sorts mostly native again. The
workload runs in a child pinned to one CPU with the busy process, so the contention does not
depend on the machine's core count. The lane's end (a test no handler ran in) is Python.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity"), reason="needs os.sched_setaffinity to share a CPU"
)

CHILD = r"""
import json, resource
from pytest_scalene.core.model import TestProfile
from pytest_scalene.sampling.cpu_sampler import CpuSampler
from pytest_scalene.sampling.scope import CodeScope

def until(seconds, step):
    start = resource.getrusage(resource.RUSAGE_SELF).ru_utime
    while resource.getrusage(resource.RUSAGE_SELF).ru_utime - start < seconds:
        step()

DATA = [(i * 7919) % 100003 for i in range(300000)]
python_loop = lambda: sum(i * i for i in range(1000))
native_sort = lambda: sorted(DATA)
before = resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw
sampler = CpuSampler(CodeScope("/nonexistent"), interval_s=0.01)
shares = {"python": [], "native": []}
for i in range(4):
    for kind, step in (("python", python_loop), ("native", native_sort)):
        profile = TestProfile(f"{kind}{i}")
        sampler.start(profile)
        until(0.2, step)
        sampler.stop()
        shares[kind].append(profile.cpu_python_s / profile.cpu_s)
sampler.close()
# A test no sample lands in, ended past its timer's expiry (the signal blocked): the lane's end
# in C (native/timer_calls.c) splits it without a frame to look at.
import signal, threading
from pytest_scalene import _timer_calls as calls
main, timer = threading.main_thread().ident, signal.ITIMER_VIRTUAL
signal.signal(signal.SIGVTALRM, lambda *_: None)
handler = calls.kernel_handler(signal.SIGVTALRM)
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGVTALRM})
shares["lane"] = []
for i in range(3):
    profile = TestProfile(f"lane{i}")
    assert calls.begin(signal.SIGVTALRM, handler, timer, 0.01, threading._active, main)
    until(0.08, python_loop)
    interval = signal.getitimer(timer)[1]
    calls.end_test(timer, interval, profile, threading._active, main)
    shares["lane"].append(profile.cpu_python_s / (profile.cpu_python_s + profile.cpu_native_s))
shares["preemptions"] = resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw - before
print(json.dumps(shares))
"""


def _pinned(cpu: int, code: str) -> list[str]:
    return [sys.executable, "-c", f"import os\nos.sched_setaffinity(0, {{{cpu}}})\n{code}"]


def test_the_split_holds_on_a_cpu_shared_with_a_busy_process(tmp_path) -> None:
    cpu = min(os.sched_getaffinity(0))
    hog = subprocess.Popen(_pinned(cpu, "while True: pass"))
    try:
        # Run from elsewhere: `python -c` puts its working directory first on sys.path, and
        # the checkout's source tree (no built extension in it) would shadow the installed one.
        child = subprocess.run(
            _pinned(cpu, CHILD), capture_output=True, text=True, timeout=300, cwd=tmp_path
        )
    finally:
        hog.kill()
        hog.wait()
    assert child.returncode == 0, child.stderr
    shares = json.loads(child.stdout)
    assert shares["preemptions"] > 50  # the contention this is about happened
    assert statistics.median(shares["python"]) >= 0.8, shares
    assert statistics.median(shares["native"]) <= 0.2, shares
    assert statistics.median(shares["lane"]) >= 0.8, shares
