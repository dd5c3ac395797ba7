"""A `benchmark` fixture compatible with pytest-benchmark's (a call, `pedantic`, `extra_info`),
registered where neither pytest-benchmark nor pytest-codspeed provides one, so that a suite
written for them runs and is gated without them. It measures nothing itself: it calls the
function, once unprofiled, and under the profiler for at least PROFILED_TIME_S, so that the
per-call figures rest on samples (calls.py divides the profile by the calls). pytest-benchmark's
command-line options are accepted (a suite's addopts often pass some): --benchmark-skip and
--benchmark-only select tests as pytest-benchmark does; the others change nothing here."""

from __future__ import annotations

import importlib.util
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

PLUGIN_NAME = "pytest-scalene-benchmark-fixture"
# The plugins that provide a `benchmark` fixture of their own (their entry points' names).
PROVIDERS = ("benchmark", "codspeed")
# pytest-benchmark's options by the values they take (its plugin.py), as "--benchmark-" + name.
FLAGS = ("disable-gc", "skip", "disable", "enable", "only", "autosave", "save-data", "verbose")
FLAGS += ("quiet",)
VALUE_OR_NOT = ("warmup", "compare", "cprofile-dump", "netrc", "histogram")
ONE_VALUE = ("min-time", "max-time", "min-rounds", "precision", "confidence", "timer", "save")
ONE_VALUE += ("calibration-precision", "warmup-iterations", "json", "cprofile", "storage")
ONE_VALUE += ("cprofile-loops", "cprofile-top", "sort", "group-by", "columns", "name")
ONE_VALUE += ("time-unit",)
VALUES = ("compare-fail",)
PROFILED_TIME_S = 0.2  # 20 samples at the default interval
MAX_PROFILED_CALLS = 1_000_000


class Benchmark:
    """The fixture's value: `benchmark(fn, *args, **kwargs)` and `benchmark.pedantic(...)` call
    the function and return its result, as pytest-benchmark's do."""

    def __init__(self, name: str) -> None:
        self.name = self.fullname = name
        self.group: str | None = None
        self.extra_info: dict[str, Any] = {}
        self.stats = None
        self.disabled = False
        self.min_time_s = 0.0  # set by the profiler (calls.py): keep calling this long

    @property
    def enabled(self) -> bool:
        return not self.disabled

    def __call__(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        result = function(*args, **kwargs)
        for _ in self._more_rounds():
            result = function(*args, **kwargs)
        return result

    def pedantic(
        self,
        target: Callable[..., Any],
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
        setup: Callable[[], Any] | None = None,
        teardown: Callable[..., Any] | None = None,
        rounds: int = 1,
        warmup_rounds: int = 0,
        iterations: int = 1,
    ) -> Any:
        _check_pedantic(rounds, warmup_rounds, iterations, setup is not None)
        for _ in range(warmup_rounds):
            self._round(target, args, kwargs, setup, teardown, iterations)
        result = None
        for _ in range(rounds):
            result = self._round(target, args, kwargs, setup, teardown, iterations)
        for _ in self._more_rounds():
            result = self._round(target, args, kwargs, setup, teardown, iterations)
        return result

    def _round(
        self,
        target: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any] | None,
        setup: Callable[[], Any] | None,
        teardown: Callable[..., Any] | None,
        iterations: int,
    ) -> Any:
        args, kwargs = arguments(args, kwargs, setup)
        result = None
        for _ in range(iterations):
            result = target(*args, **kwargs)
        if teardown is not None:
            teardown(*args, **kwargs)
        return result

    def _more_rounds(self) -> Iterator[None]:
        """Under the profiler, more rounds until min_time_s has passed since the first ended."""
        if self.min_time_s <= 0:
            return
        end = time.perf_counter() + self.min_time_s
        for _ in range(MAX_PROFILED_CALLS):
            if time.perf_counter() >= end:
                return
            yield


def arguments(
    args: tuple[Any, ...], kwargs: dict[str, Any] | None, setup: Callable[[], Any] | None
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A pedantic round's arguments: setup's, when it returns (args, kwargs), else the given."""
    kwargs = dict(kwargs or {})
    if setup is not None:
        made = setup()
        if made:
            if args or kwargs:
                raise TypeError("Can't use `args` or `kwargs` if `setup` returns the arguments.")
            args, kwargs = made
    return tuple(args), dict(kwargs)


def _check_pedantic(rounds: int, warmup_rounds: int, iterations: int, has_setup: bool) -> None:
    """pytest-benchmark's own checks, with its messages."""
    if not isinstance(iterations, int) or iterations < 1:
        raise ValueError("Must have positive int for `iterations`.")
    if not isinstance(rounds, int) or rounds < 1:
        raise ValueError("Must have positive int for `rounds`.")
    if not isinstance(warmup_rounds, int) or warmup_rounds < 0:
        raise ValueError("Must have positive int for `warmup_rounds`.")
    if iterations > 1 and has_setup:
        raise ValueError("Can't use more than 1 `iterations` with a `setup` function.")


@pytest.fixture
def benchmark(request: pytest.FixtureRequest) -> Benchmark:
    """pytest-scalene's stand-in for pytest-benchmark's fixture (docs/pytest-benchmark.md)."""
    return Benchmark(request.node.name)


def add_options(
    parser: pytest.Parser, plugins: pytest.PytestPluginManager, args: list[str]
) -> None:
    """pytest-benchmark's options, where it will not add them itself and `args` (the command
    line with addopts and PYTEST_ADDOPTS) give one or ask for help; an option a conftest or
    another plugin already has (a project's own --benchmark-only) stays theirs. Adding the 35
    of them cost every session 2.5 ms (pytest checks each new option against all the others)."""
    if not any(arg.startswith("--benchmark-") or arg in ("-h", "--help") for arg in args):
        return  # read with their defaults (getoption's), as without pytest-benchmark
    if importlib.util.find_spec("pytest_benchmark") and not plugins.is_blocked(PROVIDERS[0]):
        return
    group = parser.getgroup("benchmark", "pytest-benchmark's options (pytest-scalene's stand-in)")
    ignored = "pytest-benchmark's: ignored without it"
    selects = {"skip": "skip the benchmark tests", "only": "skip the other tests"}
    kinds: list[tuple[tuple[str, ...], dict[str, Any]]] = [
        (FLAGS, {"action": "store_true"}),
        (VALUE_OR_NOT, {"nargs": "?", "const": True}),
        (ONE_VALUE, {}),
        (VALUES, {"nargs": "+"}),
    ]
    for names, kind in kinds:
        for name in names:
            try:
                group.addoption(f"--benchmark-{name}", help=selects.get(name, ignored), **kind)
            except ValueError:  # already added by someone else
                continue


class BenchmarkSelection:
    """--benchmark-only or --benchmark-skip, as pytest-benchmark applies them (registered only
    where one is given: other sessions run no hook of ours per test)."""

    def __init__(self, only: bool, skip: bool) -> None:
        self.only, self.skip = only, skip

    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        uses = "benchmark" in getattr(item, "fixturenames", ())
        if self.only and not uses:
            pytest.skip("Skipping non-benchmark (--benchmark-only active).")
        if self.skip and uses:
            pytest.skip("Skipping benchmark (--benchmark-skip active).")


def register(config: pytest.Config) -> None:
    """Provide the fixture, and pytest-benchmark's marker, unless a plugin provides them."""
    if any(config.pluginmanager.hasplugin(name) for name in PROVIDERS):
        return
    config.addinivalue_line(
        "markers", "benchmark(**options): pytest-benchmark's options (ignored without it)"
    )
    config.pluginmanager.register(sys.modules[__name__], PLUGIN_NAME)
    # `is True`: ours are flags; an option of that name a conftest added means what it says
    only = config.getoption("benchmark_only", False) is True
    skip = config.getoption("benchmark_skip", False) is True
    if only or skip:
        config.pluginmanager.register(BenchmarkSelection(only, skip), PLUGIN_NAME + "-selection")
