"""In the counting session (child_plugin.py): a test's `benchmark` fixture, made to count one call
of the benchmarked function after a warm-up call. The counters are zeroed before that call and
dumped after it, so the count is the call's alone: neither the warm-up, nor the test's own code
around it, nor pytest-benchmark's rounds (which the fixture never reaches here).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..benchmark.fixture import arguments

FIXTURE = "benchmark"
Prepared = tuple[Callable[[], Any], Callable[[], None]]  # the call, and what follows it


def _nothing() -> None:
    pass


class OneCall:
    def __init__(self, fixture: Any, label: str) -> None:
        self.fixture = fixture
        self.label = label
        self.dumped = False
        self._class = type(fixture)

    def count(self, prepare: Callable[[], Prepared]) -> Any:
        """`prepare()` gives the call and what follows it (pedantic's setup runs in prepare,
        its teardown after: neither is counted)."""
        from .. import _callgrind

        call, after = prepare()  # the warm-up
        call()
        after()
        call, after = prepare()
        if self.dumped:  # a second use in the test: run, not counted again
            result = call()
        else:
            _callgrind.start()
            try:
                result = call()
            finally:
                _callgrind.stop_and_dump(self.label)
                self.dumped = True
        after()
        return result

    def undo(self) -> None:
        self.fixture.__class__ = self._class


def count_one_call(item: Any, label: str) -> OneCall | None:
    """Make the test's benchmark fixture, if it has one, count one call (module doc)."""
    fixture = (getattr(item, "funcargs", None) or {}).get(FIXTURE)
    if fixture is None or not callable(getattr(fixture, "pedantic", None)):
        return None
    one_call = OneCall(fixture, label)
    fixture.__class__ = _counting_class(type(fixture), one_call)
    if hasattr(fixture, "_mode"):  # pytest-benchmark: "used", so it warns of no unused fixture
        fixture._mode = "pytest-scalene instruction count"
    return one_call


def _counting_class(base: type, one_call: OneCall) -> type:
    def __call__(self: Any, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return one_call.count(lambda: (lambda: function(*args, **kwargs), _nothing))

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

        return one_call.count(prepare)

    methods = {"__call__": __call__, "pedantic": pedantic, "__module__": base.__module__}
    return type(base.__name__, (base,), methods)
