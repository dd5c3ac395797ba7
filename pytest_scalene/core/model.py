"""The profile data model shared by the samplers, the gates and every report.

Samplers add to `LineStats`/`TestProfile`; reports and gates only read them. Metrics beyond the
CPU split (memory, copy volume, leaks, GPU) live in the `extra` dicts under their JSON key names,
so a new metric needs no change here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from . import extra_keys
from .verdict import Verdict

SCHEMA_VERSION = 1
# A benchmark test's CPU, allocated and copied figures are per call of the function it gave to the
# `benchmark` fixture (extra_keys.BENCHMARK_CALLS, benchmark/calls.py); the counted totals of
# `extra` so divided:
PER_CALL_EXTRA = (extra_keys.ALLOC_MB, extra_keys.COPY_MB)
# A benchmark test's instruction counts are per call over this many counted calls
# (instructions/benchmark_count.py), kept in the counts' environment: the noise floor per call
# depends on it, so both sides must have counted as many.
COUNTED_CALLS_KEY = "benchmark calls counted"


# Where the checkout and the interpreter lie, by shape (directories, characters; never the paths,
# baselines are shared): code that resolves a path counts per directory (os.path.realpath walks
# each one), so a checkout elsewhere counts differently (+6% on a test that built a profiler,
# from a checkout 10 directories deeper). Not a reason to leave counts uncompared (most tests
# resolve no path): a regression counted elsewhere says so (gates/comparison.py).
PATHS_KEY = "paths"


def comparable_environment(environment: Mapping[str, str]) -> dict[str, str]:
    """What counts must share to be compared: their environment but where the paths lie."""
    return {k: v for k, v in environment.items() if k != PATHS_KEY}


def counted_calls(environment: Mapping[str, str]) -> int | None:
    """The calls a benchmark test's counts were counted over (COUNTED_CALLS_KEY), else None."""
    value = environment.get(COUNTED_CALLS_KEY, "")
    return int(value) if value.isdigit() and int(value) > 0 else None


class LineKey(NamedTuple):
    file: str  # posix path relative to the rootdir (absolute if outside it)
    line: int
    function: str


@dataclass
class LineStats:
    function_line: int = 0  # first line of the enclosing function (for edit-proof baselines)
    cpu_python_s: float = 0.0
    cpu_native_s: float = 0.0
    cpu_system_s: float = 0.0
    samples: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def cpu_s(self) -> float:
        return self.cpu_python_s + self.cpu_native_s + self.cpu_system_s


@dataclass
class TestProfile:
    __test__ = False  # not a test class, despite its name
    nodeid: str
    outcome: str = "unknown"
    elapsed_s: float = 0.0
    cpu_python_s: float = 0.0
    cpu_native_s: float = 0.0
    cpu_system_s: float = 0.0
    lines: dict[LineKey, LineStats] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    # The gates' (JSON: `verdicts`), set whole by gates/pipeline.py; a tuple until then, which
    # the cyclic collector does not walk (a list a test, kept all session, it did).
    verdicts: Sequence[Verdict] = ()

    @property
    def cpu_s(self) -> float:
        return self.cpu_python_s + self.cpu_native_s + self.cpu_system_s

    @property
    def calls(self) -> int:
        """The calls its figures are divided by (extra_keys.BENCHMARK_CALLS); 0 for a test
        measured whole."""
        calls = self.extra.get(extra_keys.BENCHMARK_CALLS)
        return calls if isinstance(calls, int) and calls > 0 else 0

    def line(self, key: LineKey, function_line: int = 0) -> LineStats:
        stats = self.lines.get(key)
        if stats is None:
            stats = self.lines[key] = LineStats(function_line=function_line)
        return stats


@dataclass
class SessionProfile:
    interval_s: float
    clock: str
    tests: dict[str, TestProfile] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # e.g. why a metric is unavailable
    selection: dict[str, Any] | None = None  # which tests the code map chose (selection/)
    # The gates that could not judge passing tests, each {"gate", "tests": how many, "fails":
    # whether that fails the run}, set at the session's end (gates/pipeline.py)
    unjudged: list[dict[str, Any]] = field(default_factory=list)
