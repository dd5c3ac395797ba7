"""A test that uses the `benchmark` fixture is measured per call of the benchmarked function:
the fixture's calls of it are counted, and when the test's profile is complete its CPU figures
(the test's and each line's) and its allocated and copied megabytes are divided by that count,
so that budgets, baselines and reports read the cost of one call, whatever number of rounds
pytest-benchmark's calibration chose. Peaks, resident growth, rates, leaks and the wall time
stay the test's. The samples a figure rests on stay counted (gates/comparison.py scales its
noise rule by the calls).

The fixture object keeps its identity (other fixtures may hold it, pytest-benchmark's hooks
check its type): its class is swapped for a subclass that wraps the function it is given, and
swapped back after the call phase. A second use in one test (--profile-repeat, the confirmation
of a leak or a regression) is not pytest-benchmark's to time: it runs the function itself,
through fixture.Benchmark, for PROFILED_TIME_S.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ..core import extra_keys
from ..core.model import PER_CALL_EXTRA, TestProfile
from .benchmark_fixture import PROFILED_TIME_S, Benchmark

FIXTURE = "benchmark"
_CPU_FIELDS = ("cpu_python_s", "cpu_native_s", "cpu_system_s")


def per_call(profile: TestProfile, calls: int) -> None:
    """Divide the profile's additive figures by `calls` (module doc)."""
    share = 1.0 / calls
    for holder in (profile, *profile.lines.values()):
        for name in _CPU_FIELDS:
            setattr(holder, name, getattr(holder, name) * share)
        for name in PER_CALL_EXTRA:
            value = holder.extra.get(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                holder.extra[name] = value * share
    profile.extra[extra_keys.BENCHMARK_CALLS] = calls


class BenchmarkCalls:
    """A profiler collector (sampling/profiler.py) while it watches a test: counts the
    benchmarked calls and divides the test's profile by them at the end of each profiled run.
    First among `collectors` (the profiler's) while it watches, so it stops last, after the
    memory sampler has added its figures; not among them otherwise (most tests)."""

    def __init__(self, collectors: list[Any]) -> None:
        self._collectors = collectors
        self.count = 0
        self.watched: str | None = None  # the node id of the test whose fixture is wrapped
        self._fixture: Any = None
        self._class: type | None = None
        self._at_start = 0

    def watch(self, item: Any) -> None:
        """Before a profiled call phase: wrap the test's `benchmark` fixture, if it has one."""
        fixture = (getattr(item, "funcargs", None) or {}).get(FIXTURE)
        if fixture is None or not callable(getattr(fixture, "pedantic", None)):
            return
        self.watched, self._fixture, self._class = item.nodeid, fixture, type(fixture)
        fixture.__class__ = _counting_class(type(fixture))
        fixture._scalene_calls = self
        if isinstance(fixture, Benchmark):  # ours: calls the function for long enough
            fixture.min_time_s = PROFILED_TIME_S
        self._collectors.insert(0, self)

    def unwatch(self) -> None:
        """After the call phase and its re-runs: the fixture as it was."""
        if self._fixture is None:
            return
        if self._class is not None:
            self._fixture.__class__ = self._class
            if isinstance(self._fixture, Benchmark):
                self._fixture.min_time_s = 0.0
        self.watched = self._fixture = self._class = None
        if self in self._collectors:
            self._collectors.remove(self)

    def counted(self, function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return function(*args, **kwargs)

        return call

    def start_test(self, profile: TestProfile) -> None:
        self._at_start = self.count

    def stop_test(self, profile: TestProfile) -> None:
        calls = self.count - self._at_start
        if (
            profile.nodeid == self.watched
            and calls > 0
            and extra_keys.BENCHMARK_CALLS not in profile.extra
        ):
            per_call(profile, calls)


_SUBCLASSES: dict[type, type] = {}


def _counting_class(base: type) -> type:
    """`base` with its call and pedantic counting the calls of the function they are given."""
    found = _SUBCLASSES.get(base)
    if found is not None:
        return found

    def __call__(self: Any, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        function = self._scalene_calls.counted(function)
        if _used(self):
            return _stand_in(self)(function, *args, **kwargs)
        return base.__call__(self, function, *args, **kwargs)

    def pedantic(self: Any, target: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        target = self._scalene_calls.counted(target)
        if _used(self):
            return _stand_in(self).pedantic(target, *args, **kwargs)
        return base.pedantic(self, target, *args, **kwargs)

    methods = {"__call__": __call__, "pedantic": pedantic, "__module__": base.__module__}
    found = _SUBCLASSES[base] = type(base.__name__, (base,), methods)
    return found


def _used(fixture: Any) -> bool:
    """pytest-benchmark's fixture has run (it takes one use per test)."""
    return bool(getattr(fixture, "_mode", None))


def _stand_in(fixture: Any) -> Benchmark:
    stand_in = Benchmark(str(getattr(fixture, "name", FIXTURE)))
    stand_in.min_time_s = PROFILED_TIME_S
    return stand_in
