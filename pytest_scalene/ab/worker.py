"""The pytest plugin of an A/B worker: a pytest session in one tree (the baseline's worktree or
the working tree) that collects the compared tests, then runs them on command from the
controller (pairs.py) over two pipes, one JSON object a line:

    {"cmd": "setup", "nodeid": ID}        -> {"outcome": "passed"|..., "error": TEXT}
    {"cmd": "run", "inner": K}            -> {"cpu_s": S, "outcome": ..., "error": TEXT,
                                              "functions": [[file, qualname, cpu_s, n], ...],
                                              "inclusive": [[file, qualname, cpu_s, n], ...],
                                              "sampler_error": TEXT (if a sample raised)}
    {"cmd": "lines"}                      -> {"lines": [[file, qualname, line, cpu_s], ...]}
    {"cmd": "teardown", "next": ID|None}  -> {"outcome": ...}
    {"cmd": "quit"}

A command that raises is answered {"failed": "Error: text (at file:line function <- ...)",
"traceback": TEXT} and the worker goes on serving; the controller raises WorkerError with it.

"run" collects garbage, then runs the set-up test's call phase K times (pytest's
`pytest_runtest_call` hooks, the fixture values of the setup) and replies with the process CPU
time they took and, per function of the tree, the sampled CPU time of that run and the samples
it rests on, twice: "functions" its self time (the samples whose innermost frame in the tree is
the function's) and "inclusive" (the samples with the function anywhere on the thread's stack,
each sample once per function however deep it recurses: its time as timeit would show it).
Meanwhile a timer samples the line being run in the tree's own files, pooled per test until
"lines".

The timer is a POSIX timer on the monotonic clock delivering SIGPROF every 0.5 ms (ctypes
timer_create): ITIMER_PROF, a CPU-time timer, fires at most at the kernel's tick rate (250 per
CPU-second measured here, whatever interval is asked), too few samples for a function's share
of a 20 ms run. What each sample counts is CPU time (each thread's own CPU clock since the last
signal), so a sample that arrives while the process waits or is descheduled weighs ~nothing.
Both sides pay the same signals. Without timer_create, ITIMER_PROF.

This module is loaded by path (pairs.py) and imports nothing from pytest_scalene: the baseline's
tree may hold another version of pytest-scalene, or none. pytest-scalene's own plugin is off in
the worker (-p no:scalene), so neither its sampler nor its allocator shim runs here.
"""

from __future__ import annotations

import ctypes
import gc
import hashlib
import inspect
import json
import os
import signal
import sys
import time
import traceback
from typing import Any

import pytest

FDS_ENV = "PYTEST_SCALENE_AB_FDS"  # "read_fd,write_fd"
WANTED_ENV = "PYTEST_SCALENE_AB_WANTED"  # a JSON file: the node ids to run
TREE_ENV = "PYTEST_SCALENE_AB_TREE"  # the tree's root: whose lines are sampled
SAMPLE_INTERVAL_S = 0.0005  # a POSIX timer on CLOCK_MONOTONIC: ~2000 signals per second
FALLBACK_INTERVAL_S = 0.002  # ITIMER_PROF: the kernel fires it at most ~250 times per CPU-second
CLOCK_MONOTONIC = 1
_UNSEEN = object()  # a code object the sampler has not met yet
_SKIP_PARTS = ("site-packages", "dist-packages", ".venv", "venv", ".tox", ".nox")


class Channel:
    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.read_fd = read_fd
        self.write_fd = write_fd
        self.buffer = b""

    def receive(self) -> dict[str, Any]:
        while b"\n" not in self.buffer:
            chunk = os.read(self.read_fd, 65536)
            if not chunk:
                return {"cmd": "quit"}  # the controller is gone
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message) + "\n").encode()
        while data:
            data = data[os.write(self.write_fd, data) :]


class _Sigevent(ctypes.Structure):  # struct sigevent (64 bytes); SIGEV_SIGNAL is 0
    _fields_ = [("value", ctypes.c_void_p), ("signo", ctypes.c_int), ("notify", ctypes.c_int)]
    _fields_ += [("_pad", ctypes.c_byte * (64 - ctypes.sizeof(ctypes.c_void_p) - 8))]


class _Itimerspec(ctypes.Structure):  # interval and first expiry, each (sec, nsec)
    _fields_ = [(name, ctypes.c_long) for name in ("i_s", "i_ns", "v_s", "v_ns")]


class FineTimer:
    """SIGPROF from a POSIX timer on the monotonic clock; ITIMER_PROF where there is none."""

    def __init__(self) -> None:
        self.timer = ctypes.c_void_p()
        self.libc: Any = None
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            event = _Sigevent(None, signal.SIGPROF, 0)
            if libc.timer_create(CLOCK_MONOTONIC, ctypes.byref(event), ctypes.byref(self.timer)):
                raise OSError(ctypes.get_errno(), "timer_create")
            self.libc = libc
        except (OSError, AttributeError):  # no timer_create (glibc < 2.34 keeps it in librt)
            pass

    def arm(self, interval_s: float) -> None:
        if self.libc is None:
            signal.setitimer(signal.ITIMER_PROF, FALLBACK_INTERVAL_S, FALLBACK_INTERVAL_S)
            return
        ns = int(interval_s * 1e9)
        spec = _Itimerspec(ns // 10**9, ns % 10**9, ns // 10**9, ns % 10**9)
        self.libc.timer_settime(self.timer, 0, ctypes.byref(spec), None)

    def disarm(self) -> None:
        if self.libc is None:
            signal.setitimer(signal.ITIMER_PROF, 0, 0)
        else:
            self.libc.timer_settime(self.timer, 0, ctypes.byref(_Itimerspec()), None)


def line_number(frame: Any) -> int:
    """The line a frame is at, never None: f_lineno is None on 3.11+ when the frame is on an
    instruction without a line (a loop's back-edge, a generator's resumption); then the code
    object's line table for f_lasti, else the function's first line."""
    line = frame.f_lineno
    if isinstance(line, int):
        return line
    code = frame.f_code
    lasti = getattr(frame, "f_lasti", -1)
    if lasti is not None and lasti >= 0 and hasattr(code, "co_lines"):
        for start, end, found in code.co_lines():
            if start <= lasti < end and found is not None:
                return found
    return code.co_firstlineno or 0


def function_of(qualname: str) -> str:
    """The function a code object's time is judged under: a comprehension, generator
    expression or lambda counts as the function it is in (3.12 inlines comprehensions)."""
    while ".<locals>.<" in qualname:
        head, _, tail = qualname.rpartition(".<locals>.")
        if not tail.startswith("<"):
            break
        qualname = head
    return qualname


class LineSampler:
    """CPU time per line of the tree's files, sampled: at each timer signal, each thread's
    CPU time since the previous signal (its own CPU clock) goes to the innermost frame of that
    thread that is in the tree (time in libraries to the tree's line that called them). A
    thread that waits (a `join`) gets next to nothing, the thread doing the work gets its time,
    and a long native call counts fully although the signals that fall in it arrive as one.
    The same time also goes once to every distinct function of the tree on that stack
    (inclusive: a caller holds its callees' time, a recursive function each sample once)."""

    def __init__(self, tree: str) -> None:
        self.tree = os.path.realpath(tree) + os.sep
        self.counts: dict[tuple[str, str, int], float] = {}
        # This run's CPU time and samples per function (file, function_of(qualname)): its
        # self time, and its inclusive time.
        self.run: dict[tuple[str, str], list[float]] = {}
        self.inclusive: dict[tuple[str, str], list[float]] = {}
        self._codes: dict[int, tuple[str, str] | None] = {}  # id(code) -> its function
        self._kept: list[Any] = []  # the code objects of _codes, alive so no id is reused
        self.timer = FineTimer()
        self._names: dict[str, str | None] = {}
        self._last: dict[int, float] = {}  # thread ident -> its CPU clock at the last sample
        self.error = ""  # the first exception a sample hit since start(): see _sample
        self.bottom: Any = None  # the code of the frame that runs the test (Worker._run)

    def _name(self, filename: str) -> str | None:
        if filename not in self._names:
            real = os.path.realpath(filename)
            name = None
            if not filename.startswith("<") and real.startswith(self.tree):  # not "<string>"
                rel = real[len(self.tree) :]
                if not any(part in _SKIP_PARTS for part in rel.split(os.sep)):
                    name = rel.replace(os.sep, "/")
            self._names[filename] = name
        return self._names[filename]

    def _function(self, code: Any) -> tuple[str, str] | None:
        """The function a code object's time goes to: (file, function_of(qualname)), None
        outside the tree; remembered by the code's id."""
        name = self._name(code.co_filename)
        qualname = getattr(code, "co_qualname", code.co_name)
        found = None if name is None else (name, function_of(qualname))
        self._kept.append(code)
        self._codes[id(code)] = found
        return found

    @staticmethod
    def _cpu_of(ident: int) -> float | None:
        try:
            return time.clock_gettime(time.pthread_getcpuclockid(ident))
        except (OSError, OverflowError, ValueError, AttributeError):
            return None  # the thread ended, or no per-thread clocks here

    def _sample(self, signum: int, frame: Any) -> None:
        # A signal handler runs inside the test's code: an exception here would change what
        # the test computes, so it is kept for the run's reply, which then is not judged.
        try:
            self._sample_threads()
        except Exception as exc:
            if not self.error:
                self.error = _error(exc) + _where(exc.__traceback__)

    def _sample_threads(self) -> None:
        for ident, top in sys._current_frames().items():
            now = self._cpu_of(ident)
            if now is None:
                continue
            weight = now - self._last.get(ident, 0.0)  # a thread started since: all its time
            self._last[ident] = now
            self._charge(top, weight)

    def _charge(self, frame: Any, weight: float) -> None:
        # The whole stack is walked (the inclusive figures), in the signal handler: one dict
        # look-up per frame, by the code object's id (its hash is not cached).
        codes, bottom = self._codes, self.bottom
        on_stack: set[tuple[str, str]] = set()
        while frame is not None:
            code = frame.f_code
            if code is bottom:  # the worker's own frames from here down: not the test's time
                break
            function = codes.get(id(code), _UNSEEN)
            if function is _UNSEEN:
                function = self._function(code)
            if function is not None:
                if not on_stack:  # the innermost frame in the tree: its line's self time
                    qualname = getattr(code, "co_qualname", code.co_name)
                    key = (function[0], qualname, line_number(frame))
                    self.counts[key] = self.counts.get(key, 0.0) + weight
                    found = self.run.setdefault(function, [0.0, 0])
                    found[0] += weight
                    found[1] += 1
                on_stack.add(function)
            frame = frame.f_back
        inclusive = self.inclusive
        for function in on_stack:
            found = inclusive.get(function)
            if found is None:
                inclusive[function] = [weight, 1]
            else:
                found[0] += weight
                found[1] += 1

    def start(self) -> None:
        self._last = {}
        self.run = {}
        self.inclusive = {}
        self._codes, self._kept = {}, []  # per run: the code objects kept alive stay few
        self.error = ""
        for ident in sys._current_frames():
            now = self._cpu_of(ident)
            if now is not None:
                self._last[ident] = now
        signal.signal(signal.SIGPROF, self._sample)
        self.timer.arm(SAMPLE_INTERVAL_S)

    def stop(self) -> None:
        self.timer.disarm()

    def take_run(self) -> list[list[Any]]:
        return [[f, q, round(w, 7), n] for (f, q), (w, n) in sorted(self.run.items())]

    def take_inclusive(self) -> list[list[Any]]:
        return [[f, q, round(w, 7), n] for (f, q), (w, n) in sorted(self.inclusive.items())]

    def take(self) -> list[list[Any]]:
        found = [[f, q, line, round(n, 6)] for (f, q, line), n in sorted(self.counts.items())]
        self.counts = {}
        return found


def setup_key(item: pytest.Item) -> str:
    """A digest of the source of every fixture the test uses: differs when its setup does."""
    digest = hashlib.sha256()
    info = getattr(item, "_fixtureinfo", None)
    defs = getattr(info, "name2fixturedefs", {}) or {}
    for name in sorted(getattr(item, "fixturenames", ())):
        fixturedefs = defs.get(name)
        if not fixturedefs:
            continue
        func = fixturedefs[-1].func
        try:
            source = inspect.getsource(func)
        except (OSError, TypeError):
            source = getattr(func, "__qualname__", name)
        digest.update(f"{name}\0{source}\0".encode())
    return digest.hexdigest()[:16]


def _modules() -> dict[str, str]:
    """Top-level imported modules and the file each was imported from."""
    found = {}
    for name, module in list(sys.modules.items()):
        if "." in name:
            continue
        path = getattr(module, "__file__", None)
        if isinstance(path, str):
            found[name] = os.path.realpath(path)
    return found


def _error(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


def _where(tb: Any, frames: int = 3) -> str:
    """The last frames of a traceback on one line, innermost first."""
    found = traceback.extract_tb(tb)[-frames:]
    shown = " <- ".join(f"{os.path.basename(f.filename)}:{f.lineno} {f.name}" for f in found[::-1])
    return f" (at {shown})" if shown else ""


def _report_error(report: pytest.TestReport) -> str:
    text = str(report.longreprtext or "").strip().splitlines()
    return text[-1][:300] if text else report.outcome


class Worker:
    def __init__(self, config: pytest.Config) -> None:
        read_fd, write_fd = (int(fd) for fd in os.environ[FDS_ENV].split(","))
        self.channel = Channel(read_fd, write_fd)
        self.sampler = LineSampler(os.environ.get(TREE_ENV, str(config.rootpath)))
        self.sampler.bottom = Worker._run.__code__
        path = os.environ.get(WANTED_ENV)
        self.wanted: set[str] | None = None
        if path:
            with open(path, encoding="utf-8") as wanted:
                self.wanted = set(json.load(wanted))

    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        if self.wanted is not None:
            items[:] = [item for item in items if item.nodeid in self.wanted]

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        items = {item.nodeid: item for item in session.items}
        self.channel.send(
            {
                "tests": {nodeid: setup_key(item) for nodeid, item in items.items()},
                "modules": _modules(),
                "collection_errors": session.testsfailed,
                "pid": os.getpid(),
            }
        )
        self.item: Any = None
        while True:
            message = self.channel.receive()
            command = message.get("cmd")
            if command not in {"setup", "run", "lines", "teardown"}:
                return True
            try:
                reply = self._serve(command, message, items)
            except Exception as exc:  # the controller raises WorkerError with this
                reply = {"failed": f"{_error(exc)}{_where(exc.__traceback__)}"}
                reply["traceback"] = "".join(traceback.format_exception(exc))[-4000:]
            self.channel.send(reply)

    def _serve(
        self, command: str, message: dict[str, Any], items: dict[str, pytest.Item]
    ) -> dict[str, Any]:
        from _pytest.runner import call_and_report

        if command == "setup":
            self.item = item = items[message["nodeid"]]
            if hasattr(item, "_request") and not item._request:
                item._initrequest()
            report = call_and_report(item, "setup", log=False)
            self.sampler.counts = {}
            return {"outcome": report.outcome, "error": _report_error(report)}
        if command == "run":
            return self._run(self.item, int(message.get("inner", 1)))
        if command == "lines":
            return {"lines": self.sampler.take()}
        item = self.item  # teardown
        following = items.get(message.get("next") or "")
        report = call_and_report(item, "teardown", log=False, nextitem=following)
        if hasattr(item, "_request"):
            item._request = False
            item.funcargs = None
        return {"outcome": report.outcome, "error": _report_error(report)}

    def _run(self, item: pytest.Item, inner: int) -> dict[str, Any]:
        outcome, error = "passed", ""
        # Both sides start each run from a collected heap: a collection that the allocations
        # trigger then falls in the same run on both sides (the ratios of allocation-heavy
        # tests alternated between 0.4 and 3 without this).
        gc.collect()
        self.sampler.start()
        started = time.process_time()
        try:
            for _ in range(inner):
                # Through the call phase's hooks, as pytest runs it: the logging and capture
                # plugins' wrappers are what caplog, capsys and capfd read (item.runtest()
                # alone left their tests failing on both sides: never judged).
                item.ihook.pytest_runtest_call(item=item)
                item._report_sections.clear()  # their captured output, K times per run
        except pytest.skip.Exception as exc:
            outcome, error = "skipped", _error(exc)
        except (Exception, pytest.fail.Exception) as exc:  # failed: reported, never judged
            outcome, error = "failed", _error(exc)
        finally:
            cpu_s = time.process_time() - started
            self.sampler.stop()
        found: dict[str, Any] = {"cpu_s": cpu_s, "outcome": outcome, "error": error}
        found["functions"] = self.sampler.take_run()
        found["inclusive"] = self.sampler.take_inclusive()
        if self.sampler.error:
            found["sampler_error"] = self.sampler.error
        return found


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "perf_budget(**limits): pytest-scalene budget")
    config.pluginmanager.register(Worker(config), "pytest-scalene-ab-worker")
