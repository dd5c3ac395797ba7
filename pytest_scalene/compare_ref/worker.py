"""The pytest plugin of an A/B worker: a pytest session in one tree (the baseline's worktree or
the working tree) that collects the compared tests, then runs them on command from the
controller (workers.py, pairs.py) over two pipes, one JSON object a line:

    {"cmd": "setup", "nodeid": ID}        -> {"outcome": "passed"|..., "error": TEXT}
    {"cmd": "run", "inner": K, "freeze": B} -> {"cpu_s": S, "run_s": S, "outcome": ...,
                                              "error": TEXT,
                                              "functions": [[file, qualname, cpu_s, n], ...],
                                              "inclusive": [[file, qualname, cpu_s, n], ...],
                                              "sampler_error": TEXT (if a sample raised)}
    {"cmd": "lines"}                      -> {"lines": [[file, qualname, line, cpu_s], ...]}
    {"cmd": "teardown", "next": ID|None}  -> {"outcome": ...}
    {"cmd": "quit"}

A command that raises is answered {"failed": "Error: text (at file:line function <- ...)",
"traceback": TEXT} and the worker goes on serving; the controller raises WorkerError with it.

A test that uses the `benchmark` fixture (pytest-benchmark's, pytest-codspeed's, or
benchmark/benchmark_fixture.py's stand-in where neither is installed) is timed per call of the
function it gives the fixture: each call phase calls it once, and "cpu_s" is the CPU time of
those calls alone (BenchmarkCalls).

"run" collects garbage, then runs the set-up test's call phase K times (pytest's
`pytest_runtest_call` hooks, the fixture values of the setup) and replies with the process CPU
time of the test's own calls in them ("cpu_s", TimedCall; "run_s" with the hooks) and, per
function of the tree, the sampled CPU time of that run and the samples it rests on, twice:
"functions" its self time (the samples whose innermost frame in the tree is the function's) and
"inclusive" (the samples with the function anywhere on the thread's stack, each sample once per
function however deep it recurses: its time as timeit would show it). Meanwhile a timer samples
the line being run in the tree's own files, pooled per test until "lines".

This module is loaded by path (workers.py) and imports nothing from pytest_scalene but the
modules loaded by path with it: the baseline's tree may hold another version of pytest-scalene,
or none. pytest-scalene's own plugin is off in
the worker (-p no:scalene), so neither its sampler nor its allocator shim runs here.
"""

from __future__ import annotations

import gc
import hashlib
import inspect
import json
import math
import os
import sys
import time
import traceback
from collections.abc import Generator
from typing import Any

import pytest

try:  # a module of the package (workers.py, the tests)
    from ..benchmark import benchmark_fixture as stand_in
    from .worker_sampler import LineSampler, error_line, where_line
except ImportError:  # loaded by path in a worker session, after these two (workers.py)
    import pytest_scalene_benchmark_fixture as stand_in  # type: ignore
    from pytest_scalene_ab_worker_sampler import LineSampler, error_line, where_line  # type: ignore

FDS_ENV = "PYTEST_SCALENE_AB_FDS"  # "read_fd,write_fd"
WANTED_ENV = "PYTEST_SCALENE_AB_WANTED"  # a JSON file: the node ids to run
TREE_ENV = "PYTEST_SCALENE_AB_TREE"  # the tree's root: whose lines are sampled


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


def _report_error(report: pytest.TestReport) -> str:
    text = str(report.longreprtext or "").strip().splitlines()
    return text[-1][:300] if text else report.outcome


class BenchmarkCalls:
    """The set-up test's `benchmark` fixture, made to time its function's calls, never
    pytest-benchmark's rounds: each use calls it `repeat` times (once where pedantic's setup
    makes each call's arguments), `repeat` set at the first use (the controller's warm-up run)
    to last MIN_TIMED_S: a call of a few us timed alone read clock and hook noise (cattrs'
    benchmarks: 2 of 9 slowed 1.2x caught). The worker reports the time per call."""

    MIN_TIMED_S = 0.001
    MAX_REPEAT = 10_000

    def __init__(self, fixture: Any) -> None:
        self.fixture, self.base = fixture, type(fixture)
        self.cpu_s, self.calls, self.repeat = 0.0, 0, 0
        timed = self.timed

        def call(_: Any, function: Any, *args: Any, **kwargs: Any) -> Any:
            return timed(function, args, kwargs, repeatable=True)

        def pedantic(
            _: Any,
            target: Any,
            args: Any = (),
            kwargs: Any = None,
            setup: Any = None,
            teardown: Any = None,
            **_rounds: Any,
        ) -> Any:
            args, kwargs = stand_in.arguments(args, kwargs, setup)  # pytest-benchmark's rules
            result = timed(target, args, kwargs, repeatable=setup is None)
            if teardown is not None:
                teardown(*args, **kwargs)
            return result

        methods = {"__call__": call, "pedantic": pedantic, "__module__": self.base.__module__}
        fixture.__class__ = type(self.base.__name__, (self.base,), methods)

    def timed(self, function: Any, args: Any, kwargs: Any, repeatable: bool) -> Any:
        if repeatable and not self.repeat:
            self.repeat = self._calls_per_use(function, args, kwargs)
        times = self.repeat if repeatable else 1
        started = time.process_time()
        try:
            for _ in range(times - 1):
                function(*args, **kwargs)
            return function(*args, **kwargs)
        finally:
            self.cpu_s += time.process_time() - started
            self.calls += times

    def _calls_per_use(self, function: Any, args: Any, kwargs: Any) -> int:
        """From a warm call (the first carries imports and cache fills: sized by it, one side
        called a 3 us function once a use and the other 300 times, and the per-use overhead
        read as a slowdown of unchanged code). The fastest of three warm calls: one call timed
        alone read 10 us for a 0.3 us function when the machine took the CPU away."""
        function(*args, **kwargs)
        spent = math.inf
        for _ in range(3):
            started = time.process_time()
            function(*args, **kwargs)
            spent = min(spent, time.process_time() - started)
        return max(1, min(self.MAX_REPEAT, math.ceil(self.MIN_TIMED_S / max(spent, 1e-7))))

    def undo(self) -> None:
        self.fixture.__class__ = self.base


class TimedCall:
    """The CPU time of the test's own call (item.runtest) inside the call phase's hooks."""

    def __init__(self, item: pytest.Item) -> None:
        self.item, self.cpu_s = item, 0.0
        runtest = item.runtest

        def timed() -> None:
            started = time.process_time()
            try:
                runtest()
            finally:
                self.cpu_s += time.process_time() - started

        item.runtest = timed  # type: ignore[method-assign]

    def undo(self) -> None:
        del self.item.runtest  # the class's method again


class Worker:
    benchmark: BenchmarkCalls | None = None  # the set-up test's fixture, timed per call

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
                reply = {"failed": f"{error_line(exc)}{where_line(exc.__traceback__)}"}
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
            fixture = (getattr(item, "funcargs", None) or {}).get("benchmark")
            self.benchmark = BenchmarkCalls(fixture) if hasattr(fixture, "pedantic") else None
            return {"outcome": report.outcome, "error": _report_error(report)}
        if command == "run":
            return self._run(self.item, int(message.get("inner", 1)), message.get("freeze", True))
        if command == "lines":
            return {"lines": self.sampler.take()}
        item = self.item  # teardown
        if self.benchmark is not None:
            self.benchmark.undo()
        following = items.get(message.get("next") or "")
        gc.unfreeze()  # what the runs kept goes back to the collector
        report = call_and_report(item, "teardown", log=False, nextitem=following)
        if hasattr(item, "_request"):
            item._request = False
            item.funcargs = None
        return {"outcome": report.outcome, "error": _report_error(report)}

    def _run(self, item: pytest.Item, inner: int, freeze: bool = True) -> dict[str, Any]:
        outcome, error = "passed", ""
        # Both sides start each run from a collected heap: a collection that the allocations
        # trigger then falls in the same run on both sides (the ratios of allocation-heavy
        # tests alternated between 0.4 and 3 without this). What survives is frozen (moved
        # out of the collector's generations until the teardown): the next run's collection
        # then visits only what that run left, not the whole heap of the suite's imports
        # (15 ms a run on pyparsing's suite, for runs of 20 ms). A frozen object is never
        # collected and is hidden from gc.get_objects(): a test that relies on either fails
        # frozen, and the controller runs it again unfrozen (pairs.py).
        if freeze:
            gc.collect()
            gc.freeze()
        else:
            gc.unfreeze()
            gc.collect()
        self.sampler.start()
        if self.benchmark is not None:
            self.benchmark.cpu_s, self.benchmark.calls = 0.0, 0
        # Through the call phase's hooks, as pytest runs it: the logging and capture plugins'
        # wrappers are what caplog, capsys and capfd read (item.runtest() alone left their
        # tests failing on both sides: never judged). Timed is the test's own call: the hooks'
        # 60-90 us a call, the same on both sides, pulled a 1.2x slowdown of a 100 us test
        # under the threshold (numpy-financial's 1.2x: 2 of 8 caught, 6-8 without them).
        own = TimedCall(item)
        started = time.process_time()
        try:
            for _ in range(inner):
                item.ihook.pytest_runtest_call(item=item)
                item._report_sections.clear()  # their captured output, K times per run
        except pytest.skip.Exception as exc:
            outcome, error = "skipped", error_line(exc)
        except (Exception, pytest.fail.Exception) as exc:  # failed: reported, never judged
            outcome, error = "failed", error_line(exc)
        finally:
            run_s = time.process_time() - started
            self.sampler.stop()
            own.undo()
        cpu_s, scale = own.cpu_s, 1.0
        if self.benchmark is not None and self.benchmark.calls:
            # the benchmarked function's calls alone, as `inner` calls: each side may repeat
            # it a different number of times per use (so are its lines, or the line that grew
            # was the same time on both sides, spread over half the calls on the slower one)
            scale = inner / self.benchmark.calls
            cpu_s = self.benchmark.cpu_s * scale
        self.sampler.pool(scale)
        found: dict[str, Any] = {"cpu_s": cpu_s, "outcome": outcome, "error": error}
        found["run_s"] = run_s  # hooks included: what sizes the runs (pairs.py)
        found["functions"] = self.sampler.take_run()
        found["inclusive"] = self.sampler.take_inclusive()
        if self.sampler.error:
            found["sampler_error"] = self.sampler.error
        return found


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "perf_budget(**limits): pytest-scalene budget")
    config.pluginmanager.register(Worker(config), "pytest-scalene-ab-worker")
    stand_in.register(config)  # the benchmark fixture, where no plugin provides one


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser, args: list[str]
) -> Generator[None, None, None]:
    result = yield
    # pytest-benchmark's options where it is not installed, after the conftests' own
    stand_in.add_options(parser, early_config.pluginmanager, args)
    return result
