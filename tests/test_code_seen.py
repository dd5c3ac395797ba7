"""The code map's recorder: every code object that started or resumed between start() and
stop(), in any thread, each once; nothing else; and a clear `problem` when it cannot record."""

from __future__ import annotations

import contextlib
import ctypes
import sys
import threading

import pytest

from pytest_scalene.sampling import code_seen
from pytest_scalene.sampling.code_seen import CodeSeen


@pytest.fixture(scope="module")
def recorder() -> CodeSeen:
    """One per process, as in the profiler (on 3.12+ each holds a sys.monitoring tool id)."""
    seen = CodeSeen()
    assert seen.problem is None
    return seen


def names(codes) -> set[str]:
    return {code.co_name for code in codes}


def leaf(x):
    return x + 1


def caller(n):
    return sum(leaf(i) for i in range(n))


def test_code_run_directly_is_seen_even_at_a_warm_call_site(recorder):
    for _ in range(200):  # the call sites are specialized (3.11+) before recording starts
        caller(10)
    recorder.start()
    caller(10)
    seen = recorder.stop()
    assert {"caller", "leaf"} <= names(seen)
    assert len(seen) == len(set(seen)), "each code object once"


def by_key(x):
    return -x


def mapped(x):
    return x * 2


def test_callbacks_called_from_c_are_seen(recorder):
    recorder.start()
    sorted([3, 1, 2], key=by_key)
    list(map(mapped, [1, 2]))
    assert {"by_key", "mapped"} <= names(recorder.stop())


def in_thread():
    return leaf(1)


def test_code_run_in_another_thread_is_seen(recorder):
    recorder.start()
    worker = threading.Thread(target=in_thread)
    worker.start()
    worker.join()
    assert "in_thread" in names(recorder.stop())


def counting():
    yield 1
    yield 2  # resumed after start()


def closing_on_throw():
    try:
        yield 1
    except KeyError:
        yield 2  # resumed by throw(), as contextlib does on an exception


def test_generators_started_before_start_and_resumed_after_are_seen(recorder):
    resumed, thrown = counting(), closing_on_throw()
    next(resumed), next(thrown)
    recorder.start()
    next(resumed)
    thrown.throw(KeyError())
    assert {"counting", "closing_on_throw"} <= names(recorder.stop())


class Base:
    def area(self):
        return 1


class Square(Base):
    def area(self):
        return super().area() * 4


def test_a_subclass_method_and_the_base_method_it_calls_are_seen(recorder):
    recorder.start()
    Square().area()
    seen = [code for code in recorder.stop() if code.co_name == "area"]
    assert set(seen) == {Square.area.__code__, Base.area.__code__}


def only_before():
    return 1


def only_after():
    return 2


def test_code_that_did_not_run_between_start_and_stop_is_absent(recorder):
    only_before()
    recorder.start()
    leaf(1)
    seen = names(recorder.stop())
    only_after()
    assert "leaf" in seen
    assert not {"only_before", "only_after"} & seen


def first_test_only():
    return 1


def test_consecutive_recordings_do_not_leak_into_each_other(recorder):
    recorder.start()
    first_test_only()
    leaf(1)
    assert {"first_test_only", "leaf"} <= names(recorder.stop())
    recorder.start()
    leaf(1)  # seen in the last recording too: its events were disabled there (3.12+)
    second = names(recorder.stop())
    assert "leaf" in second
    assert "first_test_only" not in second
    assert recorder.stop() == [], "a stop without a start has nothing"


def inner_only():
    return 1


def outer_only():
    return 2


def test_nested_recordings_each_see_their_own_span(recorder):
    inner = CodeSeen()  # a pytester session run inline inside a profiled test
    recorder.start()
    inner.start()
    inner_only()
    inner_seen = names(inner.stop())
    outer_only()
    outer_seen = names(recorder.stop())
    assert "inner_only" in inner_seen and "outer_only" not in inner_seen
    assert {"inner_only", "outer_only"} <= outer_seen


@pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring is 3.12+")
def test_no_free_tool_id_is_a_problem_and_records_nothing(monkeypatch):
    monitoring = sys.monitoring
    monkeypatch.setattr(code_seen, "_monitoring", code_seen._Monitoring())  # a fresh process's
    taken = [tool for tool in range(6) if monitoring.get_tool(tool) is None]
    for tool in taken:
        monitoring.use_tool_id(tool, "occupier")
    try:
        blocked = CodeSeen()
    finally:
        for tool in taken:
            monitoring.free_tool_id(tool)
    assert blocked.problem is not None and "no free sys.monitoring tool id" in blocked.problem
    blocked.start()
    leaf(1)
    assert blocked.stop() == []


def eval_frame_api():
    api = ctypes.pythonapi
    api.PyInterpreterState_Get.restype = ctypes.c_void_p
    api._PyInterpreterState_GetEvalFrameFunc.restype = ctypes.c_void_p
    api._PyInterpreterState_GetEvalFrameFunc.argtypes = [ctypes.c_void_p]
    api._PyInterpreterState_SetEvalFrameFunc.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    return api, api.PyInterpreterState_Get()


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the PEP 523 hook is for 3.10 and 3.11")
def test_another_eval_frame_function_is_a_problem_and_is_left_in_place(recorder):
    api, interp = eval_frame_api()
    default = ctypes.cast(api._PyEval_EvalFrameDefault, ctypes.c_void_p).value
    recorder.start()  # stands in for a debugger's function: our hook, installed by address
    other = api._PyInterpreterState_GetEvalFrameFunc(interp)
    recorder.stop()
    assert other != default
    api._PyInterpreterState_SetEvalFrameFunc(interp, other)
    try:
        blocked = CodeSeen()
        blocked.start()
        leaf(1)
        assert blocked.stop() == []
        assert api._PyInterpreterState_GetEvalFrameFunc(interp) == other, "left in place"
    finally:
        api._PyInterpreterState_SetEvalFrameFunc(interp, default)
    assert blocked.problem is not None and "frame-evaluation function" in blocked.problem
    recorder.start()  # usable again once it is gone, and nothing recorded meanwhile leaks in
    seen = names(recorder.stop())
    assert "leaf" not in seen


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the PEP 523 hook is for 3.10 and 3.11")
def test_a_hook_replaced_during_the_recording_makes_it_a_problem(recorder):
    api, interp = eval_frame_api()
    default = ctypes.cast(api._PyEval_EvalFrameDefault, ctypes.c_void_p).value
    recorder.start()
    ours = api._PyInterpreterState_GetEvalFrameFunc(interp)
    api._PyInterpreterState_SetEvalFrameFunc(interp, default)  # someone took the hook away
    try:
        assert recorder.stop() == []
        assert recorder.problem is not None and "incomplete" in recorder.problem
    finally:
        recorder.problem = None  # the module's recorder goes on for the other tests
        with contextlib.suppress(Exception):
            api._PyInterpreterState_SetEvalFrameFunc(interp, default)
    assert ours != default


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the PEP 523 hook is for 3.10 and 3.11")
def test_the_hook_is_installed_only_while_recording(recorder):
    api, interp = eval_frame_api()
    default = ctypes.cast(api._PyEval_EvalFrameDefault, ctypes.c_void_p).value
    assert api._PyInterpreterState_GetEvalFrameFunc(interp) == default
    recorder.start()
    during = api._PyInterpreterState_GetEvalFrameFunc(interp)
    recorder.stop()
    assert during != default
    assert api._PyInterpreterState_GetEvalFrameFunc(interp) == default, "nothing paid after stop"
