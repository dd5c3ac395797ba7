"""A sample suite whose tests use signals, timers, faulthandler, asyncio and fork themselves.

Each test writes `RESULT <name> <observation>` lines to $SIGNAL_SUITE_OUT;
tests/test_signal_conflicts.py runs it with and without --profile and expects the same lines.
Observations are exact where the behaviour is (counts of signals sent once), or a range check
printed as True/False where it is timing.
"""

import asyncio
import faulthandler
import os
import signal
import tempfile
import time

import pytest


def burn(seconds):
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass


def report(name, *values):
    """One line to $SIGNAL_SUITE_OUT (appended with one write: a fork child reports too)."""
    line = " ".join(["RESULT", name, *map(str, values)]) + "\n"
    fd = os.open(os.environ["SIGNAL_SUITE_OUT"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def test_sees_no_sampler():
    # repr: str() of an IntEnum is its number (3.11+); the code under test sees the enum member
    report(
        "getsignal", repr(signal.getsignal(signal.SIGPROF)), repr(signal.getsignal(signal.SIGALRM))
    )
    report("getitimer", signal.getitimer(signal.ITIMER_PROF), signal.getitimer(signal.ITIMER_REAL))
    report("cancel", signal.setitimer(signal.ITIMER_PROF, 0), signal.alarm(0))
    burn(0.2)


CLOCKS = {  # what each interval timer counts
    signal.ITIMER_PROF: time.process_time,
    signal.ITIMER_REAL: time.monotonic,
    signal.ITIMER_VIRTUAL: lambda: os.times().user,
}


def _ticks(name, signum, itimer, interval=0.05):
    """The test's own timer fires as often as its clock says: 0.6 s of it at 20 per second."""
    ticks = []
    old = signal.signal(signum, lambda s, f: ticks.append(s))
    previous = signal.setitimer(itimer, interval, interval)
    clock = CLOCKS[itimer]
    start = clock()
    try:
        while clock() - start < 0.6:
            pass
    finally:
        signal.setitimer(itimer, 0, 0)
        signal.signal(signum, old)
        expected = (clock() - start) / interval
    # Loose: a loaded machine delays and merges ticks (0.3 s of it once read out of 0.5x-1.5x).
    # What this must catch is the sampler's own ticks reaching the handler: 5x as many or more.
    on_time = 0.3 * expected - 2 <= len(ticks) <= 3 * expected + 2
    report(name, old, previous, set(ticks) == {signum}, on_time)


def test_own_sigprof_timer():
    _ticks("sigprof", signal.SIGPROF, signal.ITIMER_PROF)


def test_own_sigalrm_timer():
    _ticks("sigalrm", signal.SIGALRM, signal.ITIMER_REAL)


def test_own_sigvtalrm_timer():
    _ticks("sigvtalrm", signal.SIGVTALRM, signal.ITIMER_VIRTUAL)


def test_alarm():
    fired = []
    old = signal.signal(signal.SIGALRM, lambda s, f: fired.append(s))
    try:
        report("alarm", signal.alarm(1))
        deadline = time.monotonic() + 3
        while not fired and time.monotonic() < deadline:
            burn(0.01)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    report("alarm fired", fired)


def test_faulthandler_register_on_sigprof():
    with tempfile.TemporaryFile("w+") as out:
        faulthandler.register(signal.SIGPROF, file=out, all_threads=False)
        try:
            burn(0.2)  # no dump unless something sends SIGPROF
            os.kill(os.getpid(), signal.SIGPROF)
            burn(0.05)
        finally:
            faulthandler.unregister(signal.SIGPROF)
        out.seek(0)
        report("faulthandler.register dumps", out.read().count("Stack (most recent call first)"))


def test_faulthandler_dump_later():
    with tempfile.TemporaryFile("w+") as out:
        faulthandler.dump_traceback_later(0.2, file=out)
        try:
            burn(0.5)
        finally:
            faulthandler.cancel_dump_traceback_later()
        out.seek(0)
        report("dump_traceback_later", "Timeout" in out.read())


def _asyncio_count(signum):
    calls = []

    async def main():
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signum, calls.append, signum)
        try:
            os.kill(os.getpid(), signum)
            start = time.process_time()
            while time.process_time() - start < 0.3:  # CPU time: the sampler's timer runs
                burn(0.01)
                await asyncio.sleep(0)
        finally:
            loop.remove_signal_handler(signum)

    asyncio.run(main())
    return len(calls)


def test_asyncio_handler_on_sigprof():
    report("asyncio SIGPROF calls", _asyncio_count(signal.SIGPROF))


def test_asyncio_handler_on_sigusr1():
    report("asyncio SIGUSR1 calls", _asyncio_count(signal.SIGUSR1))


def test_fork_child_has_default_signals():
    pid = os.fork()
    if pid == 0:  # the child: report, then die of its own SIGPROF timer (default action)
        try:
            report("child handler", signal.getsignal(signal.SIGPROF), time.sleep.__module__)
            signal.setitimer(signal.ITIMER_PROF, 0.05)
            burn(2)
        finally:
            os._exit(7)
    _, status = os.waitpid(pid, 0)
    report("child killed by", os.WIFSIGNALED(status) and signal.Signals(os.WTERMSIG(status)).name)


@pytest.fixture
def sigprof_blocked_until_teardown():
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGPROF})
    yield
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGPROF})  # a pending SIGPROF lands now
    report("survived unblocking SIGPROF", True)


def test_blocks_sigprof_past_its_end(sigprof_blocked_until_teardown):
    burn(0.2)
