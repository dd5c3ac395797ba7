"""The pytest plugin of the counting session, which runs under callgrind (runner.py).

Instrumentation is off everywhere but around each test's call: counters zeroed, the test
called, counting stopped and the counts dumped under the test's index. Around the call, as
pytest-codspeed does: `random` seeded, the garbage collector collected then off (a collection
would land in whichever test crossed its threshold). The hash seed is pinned by the runner
(PYTHONHASHSEED=0). pytest-scalene's own plugin stays inert in this session (it sees
runenv.COUNTING_ENV, and registers this plugin instead), so
neither the allocator shim nor the sampler runs.

A test that uses the `benchmark` fixture is counted per call of the benchmarked function, over
calls after one warm-up call (its first call fills caches and imports): the fixture calls it
itself (benchmark_count.py), never pytest-benchmark's calibration, under valgrind. How many
calls: the baseline's, which the parent passes in CALLS_ENV, else sized by a probe call.
"""

from __future__ import annotations

import gc
import importlib.metadata
import json
import os
import random
import sys
from collections.abc import Generator
from pathlib import Path

import pytest

from .benchmark_count import count_calls

RESULTS_ENV = "PYTEST_SCALENE_COUNT_RESULTS"
CALLS_ENV = "PYTEST_SCALENE_COUNT_CALLS"  # a JSON file: node id -> the calls to count
LABEL_PREFIX = "pytest-scalene#"


class CountingPlugin:
    def __init__(self, results_path: str, calls: dict[str, int]) -> None:
        self.results_path = results_path
        self.calls = calls
        self.tests: dict[str, dict[str, object]] = {}  # label -> nodeid, outcome, calls
        # pytest's plugins are imported by now: what is imported later is the tests' own.
        self.imported_before = _top_level_modules()

    @pytest.hookimpl(wrapper=True, trylast=True)  # innermost: as little of pytest as possible
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        from .. import _callgrind  # built with the package; imported only where counting

        label = f"{LABEL_PREFIX}{len(self.tests)}"
        self.tests[label] = {"nodeid": item.nodeid, "outcome": "failed"}
        random.seed(0)
        gc.collect()
        was_enabled = gc.isenabled()
        gc.disable()
        out_dir = Path(self.results_path).parent  # where callgrind dumps (runner.py)
        benchmark = count_calls(item, label, out_dir, self.calls.get(item.nodeid))
        _callgrind.start()  # a benchmark test's fixture dumps its calls' counts itself
        try:
            result = yield
            self.tests[label]["outcome"] = "passed"
            return result
        finally:
            if benchmark is None or not benchmark.dumped:
                _callgrind.stop_and_dump(label)
            if benchmark is not None:
                benchmark.undo()
                if benchmark.dumped:
                    self.tests[label]["calls"] = benchmark.calls
            if was_enabled:
                gc.enable()

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        results = {
            "tests": self.tests,
            "packages": _imported_packages(_top_level_modules() - self.imported_before),
            "perf_map": f"/tmp/perf-{os.getpid()}.map",
        }
        with open(self.results_path, "w", encoding="utf-8") as out:
            json.dump(results, out)


def _top_level_modules() -> set[str]:
    return {name.split(".", 1)[0] for name in list(sys.modules)}


def _imported_packages(imported: set[str]) -> dict[str, str]:
    """Distribution versions of the modules the tests imported, and pytest's (its hooks run in
    the counted call): part of the counts' environment (a new numpy can change a test's
    instructions with no change of its code)."""
    imported = imported | {"pytest", "_pytest", "pluggy"}
    try:
        owners = importlib.metadata.packages_distributions()
    except Exception:  # a broken distribution's metadata must not lose the counts
        return {}
    versions: dict[str, str] = {}
    for module in imported & owners.keys():
        for dist in owners[module]:
            try:
                versions[dist] = importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                continue
    return dict(sorted(versions.items()))


def register(config: pytest.Config) -> None:
    """Called by pytest-scalene's plugin in the counting session (runenv.COUNTING_ENV)."""
    path = os.environ.get(RESULTS_ENV)
    if path:
        calls_path = os.environ.get(CALLS_ENV)
        with open(calls_path or os.devnull, encoding="utf-8") as file:
            calls = json.loads(file.read() or "{}")
        config.pluginmanager.register(CountingPlugin(path, calls), "pytest-scalene-counting")
