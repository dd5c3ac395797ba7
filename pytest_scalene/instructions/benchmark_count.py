"""In the counting session (child_plugin.py): a test's `benchmark` fixture, made to count calls
of the benchmarked function after a warm-up call. The counts are per call of `calls` calls,
so that a call of a few microseconds is counted over enough instructions for the gate's floor
(noise_rule.INSTRUCTIONS_FLOOR, a count's noise across sessions whatever its size) to be a
small share of it: `calls` is the baseline's where one is stored (both sides counted the same
way), else sized from a probe call's count (COUNTED_INSTRUCTIONS), a power of two. The probe
call runs either way: the counted calls always follow the same two calls.

Only the calls are counted: the counters are zeroed before them and dumped after them, and
pedantic's setup and teardown between calls are not collected. Neither the warm-up, nor the
test's own code around it, nor pytest-benchmark's rounds (which the fixture never reaches here).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..benchmark.benchmark_fixture import arguments

FIXTURE = "benchmark"
# The instructions the counted calls should add up to: the floor is then 2% of a call's count,
# the instructions' default tolerance. A probe call's count sizes the calls (a power of two).
COUNTED_INSTRUCTIONS = 1_000_000
MAX_COUNTED_CALLS = 1024
PROBE_SUFFIX = "~probe"
Prepared = tuple[Callable[[], Any], Callable[[], None]]  # the call, and what follows it
_TOTALS = re.compile(rb"^(?:totals|summary):\s*(\d+)", re.MULTILINE)


def _nothing() -> None:
    pass


def calls_for(probe_instructions: int) -> int:
    """The calls to count for a call of `probe_instructions`: a power of two, at most
    MAX_COUNTED_CALLS, that brings them to COUNTED_INSTRUCTIONS."""
    wanted = COUNTED_INSTRUCTIONS / max(1, probe_instructions)
    if wanted <= 1:
        return 1
    return min(MAX_COUNTED_CALLS, 2 ** math.ceil(math.log2(wanted)))


def dumped_total(out_dir: Path, label: str) -> int | None:
    """The total of this process's last dump in `out_dir` if it is `label`'s. Callgrind names
    dumps callgrind.out.PID.N, N counting up: the highest N is the last (file times tie within
    a clock tick). Other processes' files are there too (a test's subprocesses, counted)."""
    numbered = []
    for path in out_dir.glob(f"callgrind.out.{os.getpid()}.*"):
        number = path.name.rsplit(".", 1)[1]
        if number.isdigit():
            numbered.append((int(number), path))
    if not numbered:
        return None
    text = max(numbered)[1].read_bytes()
    header = text[: text.find(b"\nfn=")]  # its cmd: line holds every node id counted
    if f"\ndesc: Trigger: Client Request: {label}\n".encode() not in header:
        return None
    found = _TOTALS.findall(text)
    return int(found[-1]) if found else None


class CountedCalls:
    """One test's fixture counting: `calls` set by the baseline, else by the probe."""

    def __init__(self, fixture: Any, label: str, out_dir: Path, calls: int | None) -> None:
        self.fixture = fixture
        self.label = label
        self.out_dir = out_dir
        self.calls = calls  # None: sized by the probe
        self.dumped = False
        self._class = type(fixture)

    def count(self, prepare: Callable[[], Prepared]) -> Any:
        """`prepare()` gives a call and what follows it (pedantic's setup runs in prepare,
        its teardown after: neither is counted)."""
        from .. import _callgrind

        call, after = prepare()  # the warm-up
        result = call()
        after()
        if self.dumped:  # a second use in the test: run, not counted again
            return result
        # The probe runs whether or not the baseline gives the calls: the counted calls must
        # come after as many calls on both sides (the interpreter specializes code as it runs:
        # a second call counted 5-25% more than a third on cattrs' benchmarks).
        probed = self._probe(prepare)
        if self.calls is None:
            self.calls = probed
        call, after = prepare()
        _callgrind.start()
        try:
            for done in range(self.calls):
                if done:
                    _callgrind.toggle_collect()  # off: the teardown and the next setup
                    try:
                        after()
                        call, after = prepare()
                    finally:  # on again whatever they raised: the next tests count
                        _callgrind.toggle_collect()
                result = call()
        finally:
            _callgrind.stop_and_dump(self.label)
            self.dumped = True
        after()
        return result

    def _probe(self, prepare: Callable[[], Prepared]) -> int:
        """One call counted on its own, to size the counted calls."""
        from .. import _callgrind

        call, after = prepare()
        label = self.label + PROBE_SUFFIX
        _callgrind.start()
        try:
            call()
        finally:
            _callgrind.stop_and_dump(label)
        after()
        total = dumped_total(self.out_dir, label)
        # Unread (no dump found): one call, as before the calls were sized; the calls are in
        # the counts' environment, so a baseline's and a comparison's still count alike.
        return 1 if total is None else calls_for(total)

    def undo(self) -> None:
        self.fixture.__class__ = self._class


def count_calls(item: Any, label: str, out_dir: Path, calls: int | None) -> CountedCalls | None:
    """Make the test's benchmark fixture, if it has one, count its calls (module doc)."""
    fixture = (getattr(item, "funcargs", None) or {}).get(FIXTURE)
    if fixture is None or not callable(getattr(fixture, "pedantic", None)):
        return None
    counted = CountedCalls(fixture, label, out_dir, calls)
    fixture.__class__ = _counting_class(type(fixture), counted)
    if hasattr(fixture, "_mode"):  # pytest-benchmark: "used", so it warns of no unused fixture
        fixture._mode = "pytest-scalene instruction count"
    return counted


def _counting_class(base: type, counted: CountedCalls) -> type:
    def __call__(self: Any, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return counted.count(lambda: (lambda: function(*args, **kwargs), _nothing))

    def pedantic(
        self: Any,
        target: Callable[..., Any],
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
        setup: Callable[[], Any] | None = None,
        teardown: Callable[..., Any] | None = None,
        **_rounds: Any,
    ) -> Any:
        def prepare() -> Prepared:
            call_args, call_kwargs = arguments(args, kwargs, setup)

            def after() -> None:
                if teardown is not None:
                    teardown(*call_args, **call_kwargs)

            return lambda: target(*call_args, **call_kwargs), after

        return counted.count(prepare)

    methods = {"__call__": __call__, "pedantic": pedantic, "__module__": base.__module__}
    return type(base.__name__, (base,), methods)
