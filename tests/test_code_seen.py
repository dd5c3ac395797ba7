"""The code map's recorder: every code object that started or resumed between start() and
stop(), in any thread, each once; nothing else; and a clear `problem` when it cannot record."""

from __future__ import annotations

import contextlib
import ctypes
import sys
import sysconfig
import threading
import types

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


needs_monitoring = pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring is 3.12+")


def registered_callbacks(tool: int) -> list:
    """The callbacks registered for the recorder's three events (put back as they were)."""
    monitoring, found = sys.monitoring, []
    for event in ("PY_START", "PY_RESUME", "PY_THROW"):
        number = getattr(monitoring.events, event)
        found.append(monitoring.register_callback(tool, number, None))
        monitoring.register_callback(tool, number, found[-1])
    return found


def native_callback():
    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        pytest.skip("a free-threaded build records with Python callbacks")
    native = code_seen._native_callback()
    assert native is not None, "the extension has no sys.monitoring callback"
    return native[1]


@needs_monitoring
def test_the_extension_s_builtin_is_the_callback_registered_for_every_event(recorder):
    native_callback()
    assert code_seen._monitoring.native is not None
    callbacks = registered_callbacks(code_seen._monitoring.tool)
    assert all(isinstance(c, types.BuiltinFunctionType) for c in callbacks), callbacks


@needs_monitoring
def test_the_builtin_disables_a_started_code_but_not_a_throw(recorder):
    callback = native_callback()
    code = leaf.__code__
    assert callback(code, 0) is sys.monitoring.DISABLE
    assert callback(code, 0, KeyError()) is None, "PY_THROW cannot be disabled"


@needs_monitoring
def test_the_builtin_refuses_what_is_not_a_code_object_or_the_wrong_arity(recorder):
    callback = native_callback()
    with pytest.raises(TypeError, match="takes a code object, not str"):
        callback("leaf", 0)
    with pytest.raises(TypeError, match="not 1 arguments"):
        callback(leaf.__code__)


def fallback_only():
    return 3


@needs_monitoring
def test_without_the_extension_s_callback_python_callbacks_record(monkeypatch, recorder):
    monkeypatch.setattr(code_seen, "_native_callback", lambda: None)  # not built, free-threaded
    fresh = code_seen._Monitoring()  # a fresh process's: takes the next free tool id
    monkeypatch.setattr(code_seen, "_monitoring", fresh)
    python_recorder = CodeSeen()
    try:
        assert python_recorder.problem is None and fresh.native is None
        assert not any(
            isinstance(c, types.BuiltinFunctionType) for c in registered_callbacks(fresh.tool)
        )
        python_recorder.start()
        fallback_only()
        seen = names(python_recorder.stop())
    finally:
        monitoring = sys.monitoring
        monitoring.set_events(fresh.tool, 0)
        for event in (monitoring.events.PY_START, monitoring.events.PY_RESUME):
            monitoring.register_callback(fresh.tool, event, None)
        monitoring.register_callback(fresh.tool, monitoring.events.PY_THROW, None)
        monitoring.free_tool_id(fresh.tool)
    assert "fallback_only" in seen


def test_code_run_between_recordings_is_not_kept_alive(recorder):
    import gc
    import weakref

    recorder.start()
    recorder.stop()
    namespace: dict = {}
    exec("def between():\n    return 1", namespace)  # a code object no module keeps
    namespace["between"]()
    code = weakref.ref(namespace.pop("between").__code__)
    gc.collect()
    assert code() is None, "the recorder keeps a reference to code it was not asked to record"


@needs_monitoring
def test_following_sees_followed_code_in_every_recording_and_the_rest_where_it_first_ran():
    native_callback()
    namespace: dict = {}
    exec("def followed_f():\n    return 1\ndef other_g():\n    return 2", namespace)  # fresh code
    f, g = namespace["followed_f"], namespace["other_g"]
    follower = CodeSeen(follow=lambda code: code.co_name.startswith("followed_"))
    assert follower.first_runs_only, "a second sys.monitoring tool id was free"
    try:
        follower.start()
        f(), g()
        assert {"followed_f", "other_g"} <= names(follower.stop())  # both ran here first
        f(), g()  # between recordings
        assert "followed_f" in names(follower.take_outside())
        follower.start()
        for _ in range(100):  # a warm call site
            f(), g()
        second = names(follower.stop())
        assert "followed_f" in second, "followed code is seen in every recording"
        assert "other_g" not in second, "the rest only where it first ran"
        exec("def followed_h():\n    return 3", namespace)
        namespace["followed_h"]()  # first run between recordings: followed from then on
        follower.start()
        namespace["followed_h"](), f()
        assert {"followed_h", "followed_f"} <= names(follower.stop())
        assert "other_g" not in names(follower.take_outside())
    finally:
        code_seen._monitoring.native.code_seen_keep_outside(False)  # as for the other tests
        code_seen._monitoring.keeping_outside = False
