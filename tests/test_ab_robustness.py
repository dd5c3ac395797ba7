"""The A/B machinery (pytest_scalene/compare_ref/) in every frame state and when a worker fails:
unit tests with fake frames, fake channels and fake workers, fast and deterministic. The end-to-end
behaviour (a dying worker's note, the run's exit status) is in test_compare_ref.py."""

from __future__ import annotations

import gc
import json
import os
import signal
import sys
import time
import weakref
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_scalene.compare_ref import ab_run, ab_statistic, pairs, worker, worker_sampler, workers

# start() installs the line sampler's SIGPROF handler: later tests get theirs back.
pytestmark = pytest.mark.usefixtures("sigprof_restored")


def a_loop() -> int:
    total = 0
    for i in range(3):
        total += i
    return total


def fake_frame(code: Any, lineno: int | None, lasti: int = -1, back: Any = None) -> Any:
    return SimpleNamespace(f_code=code, f_lineno=lineno, f_lasti=lasti, f_back=back)


def in_tree(tmp_path, name: str = "lib.py") -> Any:
    """A code object whose file is in the sampled tree."""
    path = tmp_path / name
    path.write_text("def work():\n    x = 1\n    return x\n")
    namespace: dict[str, Any] = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    return namespace["work"].__code__


def test_a_frame_without_a_line_number_is_charged_to_its_line_table_or_first_line():
    code = a_loop.__code__
    offsets = [(start, line) for start, _, line in code.co_lines() if line is not None]
    start, line = offsets[-1]
    assert worker_sampler.line_number(fake_frame(code, None, start)) == line
    assert worker_sampler.line_number(fake_frame(code, None, -1)) == code.co_firstlineno
    assert worker_sampler.line_number(fake_frame(code, 7, start)) == 7
    # A real frame: its own line, an int.
    assert isinstance(worker_sampler.line_number(sys._getframe()), int)


def test_samples_with_and_without_a_line_number_are_pooled_and_taken(tmp_path):
    """On 3.11 f_lineno is None on a loop's back-edge: a key with None beside one with an int
    made take()'s sort raise TypeError, and every worker died at its first sample."""
    sampler = worker_sampler.LineSampler(str(tmp_path))
    code = in_tree(tmp_path)
    library = fake_frame(compile("pass", "/usr/lib/python3/json.py", "exec"), 1)
    sampler._charge(fake_frame(code, 2), 0.001)
    sampler._charge(fake_frame(code, None, -1), 0.002)  # charged to the first line
    sampler._charge(fake_frame(library.f_code, None, back=fake_frame(code, None, -1)), 0.004)
    assert sampler.take_run() == [["lib.py", "work", 0.007, 3]]
    sampler.pool(0.5)  # a run of a benchmark test that called its function twice a run
    lines = sampler.take()
    assert lines == [["lib.py", "work", 1, 0.003], ["lib.py", "work", 2, 0.0005]]
    assert all(isinstance(line, int) for _, _, line, _ in lines)
    assert ab_statistic.most_growth(lines, lines) == []  # the judge reads them


def test_generators_coroutines_deep_recursion_and_callbacks_are_sampled(tmp_path):
    sampler = worker_sampler.LineSampler(str(tmp_path))
    source = tmp_path / "shapes.py"
    source.write_text(
        "import asyncio, functools\n"
        "def gen(sample):\n    sample()\n    yield 1\n"
        "async def coro(sample):\n    sample()\n"
        "def deep(n, sample):\n    return sample() if n == 0 else deep(n - 1, sample)\n"
        "def callback(sample):\n    return sorted([2, 1], key=functools.cmp_to_key("
        "lambda a, b: sample() or a - b))\n"
    )
    shapes: dict[str, Any] = {}
    exec(compile(source.read_text(), str(source), "exec"), shapes)

    def sample() -> None:
        sampler._sample(0, None)

    sampler.start()
    try:
        next(shapes["gen"](sample))
        shapes["asyncio"].run(shapes["coro"](sample))
        shapes["deep"](sys.getrecursionlimit() // 2, sample)
        shapes["callback"](sample)
    finally:
        sampler.stop()
    assert sampler.error == ""
    sampler.pool()
    functions = {q for _, q, _, _ in sampler.take()}
    # Code objects have qualified names from 3.11 on; 3.10 names the lambda alone
    lam = "callback.<locals>.<lambda>" if sys.version_info >= (3, 11) else "<lambda>"
    assert {"gen", "coro", "deep", lam} <= functions


def test_the_signal_handler_never_raises_into_the_test(tmp_path):
    sampler = worker_sampler.LineSampler(str(tmp_path))

    def broken(frame: Any, weight: float) -> None:
        raise TypeError("'<' not supported between instances of 'int' and 'NoneType'")

    sampler._charge = broken  # type: ignore[method-assign]
    sampler._sample(0, None)  # would raise inside whatever the test was running
    assert sampler.error.startswith("TypeError: '<' not supported"), sampler.error
    assert "test_ab_robustness.py" in sampler.error  # where it happened


class FakeChannel:
    def __init__(self, messages: list[dict[str, Any]]) -> None:
        self.messages = messages
        self.sent: list[dict[str, Any]] = []

    def receive(self) -> dict[str, Any]:
        return self.messages.pop(0) if self.messages else {"cmd": "quit"}

    def send(self, message: dict[str, Any]) -> None:
        self.sent.append(json.loads(json.dumps(message)))  # what the pipe carries


def test_a_command_that_raises_in_the_worker_is_answered_with_the_error(tmp_path):
    served = worker.Worker.__new__(worker.Worker)
    commands = [{"cmd": "setup", "nodeid": "test_x.py::missing"}, {"cmd": "lines"}]
    served.channel = FakeChannel(commands)
    served.sampler = worker_sampler.LineSampler(str(tmp_path))
    assert served.pytest_runtestloop(SimpleNamespace(items=[], testsfailed=0)) is True
    hello, failed, lines = served.channel.sent
    assert failed["failed"].startswith("KeyError: 'test_x.py::missing' (at worker.py:"), failed
    assert "Traceback (most recent call last)" in failed["traceback"]
    assert lines == {"lines": []}  # the worker goes on serving


def test_the_controller_raises_the_workers_error_and_a_dead_workers_output(tmp_path):
    process = workers.WorkerProcess.__new__(workers.WorkerProcess)
    process.side = workers.Side("baseline", tmp_path, tmp_path)
    process.buffer = b'{"failed": "KeyError: \'x\' (at worker.py:12 _serve)"}\n'
    with pytest.raises(
        workers.WorkerError, match=r"baseline worker failed during its start-up: KeyError: 'x' \(at"
    ):
        process.receive(1.0)
    # A worker that died: its exit status and its output's last lines, whatever is asked.
    process.log_path = tmp_path / "output.txt"
    process.log_path.write_text("collected 1 item\nFatal Python error: Segmentation fault\n")
    process.process = SimpleNamespace(wait=lambda timeout: -11, poll=lambda: -11)
    process.from_worker, process.to_worker = os.pipe()
    os.close(process.to_worker)
    try:
        with pytest.raises(workers.WorkerError) as died:
            process.request({"cmd": "teardown"}, 1.0)
    finally:
        os.close(process.from_worker)
    assert "ended (exit status -11) during 'teardown' of" in str(died.value)
    assert "Fatal Python error: Segmentation fault" in str(died.value)


def test_a_sampler_error_makes_a_note_not_a_verdict():
    replies = [{"outcome": "passed", "sampler_error": "TypeError: boom (at worker.py:1 x)"}]
    note = pairs._runs_ok(replies, ["current"])
    assert note == "the current side's line sampler failed: TypeError: boom (at worker.py:1 x)"


def test_the_statistic_is_the_median_of_the_paired_ratios():
    """A few outlying pairs (a preempted run) move a mean, not the median: the rule must read
    mostly-unchanged code as unchanged, and a mean would fail it."""
    at_first_stage = [1.0] * 8 + [3.0] * 2  # mean 1.4, above the first stage's 1.30
    assert ab_statistic.median_ratio(at_first_stage) == 1.0
    assert ab_statistic.decide(at_first_stage) == "pass"
    at_last_stage = [1.0] * 36 + [3.0] * 4  # mean 1.2, above FAIL_ABOVE
    assert ab_statistic.decide(at_last_stage) == "pass"
    outcome = pairs.Outcome("t", ratios=at_first_stage)
    assert pairs.decide(outcome) == "pass" and outcome.test_verdict == "pass"
    # And the other way: a few fast outliers do not hide a slowdown.
    assert ab_statistic.decide([1.5] * 8 + [0.2] * 2) == "fail"


def no_progress(nodeid: str) -> None:
    pass


def fake_workers() -> list[Any]:
    return [
        SimpleNamespace(side=SimpleNamespace(name=name))
        for name in ("baseline", "current")
        for _ in range(workers.WORKERS_PER_SIDE)
    ]


def _compared(readings: dict[str, list[list[float]]]) -> tuple[pairs.Outcome, int]:
    """One test compared on `readings` (one list of ratios per reading, in turn): its outcome
    and how many fresh sets of workers it took."""
    nodeid = next(iter(readings))
    restarts = []

    def restart() -> list[Any]:
        restarts.append(1)
        return fake_workers()

    side = workers.Side("baseline", None, None, tests={nodeid: "k"})  # type: ignore[arg-type]
    result = ab_run.Result()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pairs, "compare_test", lambda nodeid, *_: _reading(readings, nodeid))
        ab_run._compare_all([nodeid], side, side, fake_workers(), result, no_progress, restart)
    assert not readings[nodeid], "a reading was left unmeasured"
    return result.outcomes[nodeid], len(restarts)


def test_a_slower_first_reading_is_confirmed_in_fresh_workers() -> None:
    outcome, restarts = _compared({"test_a.py::test_x": [[1.5] * 10, [1.5] * 10]})
    assert restarts == 1 and outcome.verdict == "fail" and outcome.first_ratio == 1.5
    assert outcome.second_ratio is None


@pytest.mark.parametrize(("third", "decides"), [(1.0, "pass"), (1.5, "fail")])
def test_a_first_reading_overturned_by_the_second_is_decided_by_a_third(third, decides) -> None:
    # Either reading can be the one that drew unlike processes: a real 1.3x slowdown once read
    # slower, then not, and passed silently when the second reading decided alone.
    outcome, restarts = _compared({"test_a.py::test_x": [[1.5] * 10, [1.0] * 10, [third] * 10]})
    assert restarts == 2 and outcome.verdict == decides, outcome
    assert (outcome.first_ratio, outcome.second_ratio) == (1.5, 1.0)


def test_a_third_reading_that_cannot_be_had_leaves_the_test_not_judged() -> None:
    nodeid = "test_a.py::test_x"
    readings = {nodeid: [[1.5] * 10, [1.0] * 10]}
    fresh = [fake_workers]

    def restart() -> list[Any]:
        if not fresh:
            raise workers.WorkerError("a worker did not start again")
        return fresh.pop()()

    side = workers.Side("baseline", None, None, tests={nodeid: "k"})  # type: ignore[arg-type]
    result = ab_run.Result()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pairs, "compare_test", lambda nodeid, *_: _reading(readings, nodeid))
        ab_run._compare_all([nodeid], side, side, fake_workers(), result, no_progress, restart)
    outcome = result.outcomes[nodeid]
    assert outcome.verdict is None and "did not start again" in outcome.note


def _functions(*grew: str) -> list[ab_statistic.FunctionVerdict]:
    """A reading's function verdicts: each named function's share grew clearly (z 6) while
    its ratio stayed under the threshold; "other" did not grow."""
    clear = [ab_statistic.FunctionVerdict("m.py", f, 1.05, 1.2, 6.0, 0.1, 0.12, (90, 99), "pass")
             for f in grew]  # fmt: skip
    return [
        *clear,
        ab_statistic.FunctionVerdict("m.py", "other", 1.0, 1.0, 0.0, 0.5, 0.5, (9, 9), "pass"),
    ]


@pytest.mark.parametrize(
    ("second_grew", "decides"),
    [(("suspected",), "fail"), ((), "pass"), (("other_function",), "pass")],
)
def test_a_suspect_pass_fails_only_where_the_second_reading_bears_the_function_out(
    monkeypatch, second_grew, decides
):
    """A pass in which a function's share clearly grew is measured again in fresh workers. Its
    second reading failing on the test's time alone is that reading's noise (cattrs: 0.67x,
    then 1.19x, no function's share grown): the pass stands. With the suspected function's share
    grown again, the failure stands."""
    first = pairs.Outcome("t.py::t", verdict="pass", ratios=[1.0] * 10)
    first.functions = _functions("suspected")
    second = pairs.Outcome("t.py::t", verdict="fail", ratios=[1.2] * 20)
    second.functions = _functions(*second_grew)
    readings = [first, second]
    monkeypatch.setattr(pairs, "compare_test", lambda nodeid, *_: readings.pop(0))
    side = workers.Side("baseline", None, None, tests={"t.py::t": "k"})  # type: ignore[arg-type]
    result = ab_run.Result()
    ab_run._compare_all(["t.py::t"], side, side, fake_workers(), result, no_progress, fake_workers)
    assert not readings  # measured twice
    assert result.outcomes["t.py::t"].verdict == decides


def _reading(readings: dict[str, list[list[float]]], nodeid: str) -> pairs.Outcome:
    ratios = readings[nodeid].pop(0)
    found = pairs.Outcome(nodeid, ratios=ratios)
    found.verdict = ab_statistic.decide(ratios)
    return found


def test_a_worker_error_gives_every_test_left_its_cause(monkeypatch):
    def compare_test(nodeid: str, *_: Any) -> pairs.Outcome:
        raise workers.WorkerError(
            "the current worker ended (exit status 3); its output ends with: x"
        )

    monkeypatch.setattr(pairs, "compare_test", compare_test)
    tests = {f"t.py::test_{i}": "k" for i in range(3)}
    side = workers.Side("baseline", None, None, tests=tests)  # type: ignore[arg-type]
    result = ab_run.Result()
    ab_run._compare_all(list(tests), side, side, fake_workers(), result, no_progress, list)
    notes = [o.note for o in result.outcomes.values()]
    assert all("the current worker ended (exit status 3)" in note for note in notes), notes
    assert all(ab_run.comparable(note) for note in notes)


def test_after_a_worker_error_the_next_tests_go_on_in_fresh_workers(monkeypatch):
    """One test that kills its worker must not leave the rest of the suite unjudged; a worker
    that fails every test is restarted MAX_RESTARTS times, then the rest carry the cause."""
    killers = {"t.py::test_1"}

    def compare_test(nodeid: str, *_: Any) -> pairs.Outcome:
        if nodeid in killers:
            raise workers.WorkerError(f"the baseline worker ended (exit status 3) during {nodeid}")
        return _reading({nodeid: [[1.0] * 10]}, nodeid)

    monkeypatch.setattr(pairs, "compare_test", compare_test)
    restarts: list[int] = []

    def restart() -> list[Any]:
        restarts.append(1)
        return fake_workers()

    tests = {f"t.py::test_{i}": "k" for i in range(8)}
    side = workers.Side("baseline", None, None, tests=tests)  # type: ignore[arg-type]
    result = ab_run.Result()
    ab_run._compare_all(list(tests), side, side, fake_workers(), result, no_progress, restart)
    verdicts = {n: o.verdict for n, o in result.outcomes.items()}
    assert verdicts == {n: None if n in killers else "pass" for n in tests}, result.outcomes
    assert "exit status 3" in result.outcomes["t.py::test_1"].note and restarts == [1]

    killers.update(tests)  # every test kills its worker
    restarts.clear()
    result = ab_run.Result()
    ab_run._compare_all(list(tests), side, side, fake_workers(), result, no_progress, restart)
    assert len(restarts) == ab_run.MAX_RESTARTS
    assert all(o.verdict is None and "exit status 3" in o.note for o in result.outcomes.values())
    assert "before its turn" in result.outcomes["t.py::test_7"].note


def test_only_tests_with_nothing_to_compare_with_are_not_failures_to_judge():
    assert not ab_run.comparable("not judged: the test exists on the current side only")
    assert ab_run.comparable(
        "not judged: the test exists on the current side only (the baseline side had 2 "
        "collection errors)"
    )
    assert not ab_run.comparable(ab_run.NOT_COMPARABLE[1])
    assert ab_run.comparable("not judged: it failed on the baseline side (boom)")


def test_a_sample_keeps_no_frame_alive(tmp_path):
    """What a test deletes is gone at once, sampled or not (filelock checks that a deleted
    lock leaves its registry): the sampler's own frame, bound in the handler, made a cycle
    that kept the interrupted frames and their locals alive until a collection."""
    sampler = worker_sampler.LineSampler(str(tmp_path))

    class Lock:
        pass

    def make_and_sample() -> weakref.ref:
        lock = Lock()
        sampler._sample(0, None)  # as a signal arriving here
        return weakref.ref(lock)

    was_enabled = gc.isenabled()
    gc.disable()  # only reference counts may free it
    try:
        sampler.start()
        try:
            gone = make_and_sample()
        finally:
            sampler.stop()
        assert sampler.error == ""
        assert gone() is None, gc.get_referrers(gone())
    finally:
        if was_enabled:
            gc.enable()


def _spend(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_a_run_is_timed_on_the_tests_own_call_not_the_hooks_around_it(tmp_path):
    """pytest's call-phase wrappers cost 60-90 us a call on both sides: timed with the test, they
    pulled a 1.2x slowdown of a 100 us test to 1.09x, under the threshold."""

    class Item:
        funcargs: dict[str, Any] = {}
        _report_sections: list[Any] = []

        def runtest(self) -> None:
            _spend(0.002)

    def call_phase(item: Any) -> None:
        _spend(0.004)  # the hooks' wrappers
        item.runtest()

    item = Item()
    item.ihook = SimpleNamespace(pytest_runtest_call=call_phase)
    served = worker.Worker.__new__(worker.Worker)
    served.sampler = worker_sampler.LineSampler(str(tmp_path))
    found = served._run(item, inner=5)
    assert found["outcome"] == "passed"
    assert 0.009 <= found["cpu_s"] < 0.02 <= found["run_s"], found  # 5 x 2 ms, of 5 x 6 ms
    assert item.runtest.__func__ is Item.runtest  # the test's own method again


def test_a_benchmarked_call_of_microseconds_is_timed_over_many_calls():
    """cattrs' benchmarks call functions of a few us: timed one call per use, their A/B ratios
    were clock and hook noise (2 of 9 slowed 1.2x caught)."""

    class Fixture:
        def __call__(self, function: Any, *args: Any) -> Any: ...

        def pedantic(self, target: Any, *args: Any, **kwargs: Any) -> Any: ...

    fixture = Fixture()
    timed = worker.BenchmarkCalls(fixture)
    calls: list[int] = []

    def cold_first(value: int) -> None:  # its first call fills a cache: 5 ms
        if not calls:
            _spend(0.005)
        calls.append(value)

    fixture(cold_first, 1)  # the first use sets how many calls a use makes, from a warm call
    assert timed.repeat > 100 and calls.count(1) == 4 + timed.repeat
    timed.cpu_s, timed.calls = 0.0, 0
    fixture(calls.append, 2)
    assert calls.count(2) == timed.calls == timed.repeat
    made = []
    fixture.pedantic(calls.append, setup=lambda: made.append(1) or ((3,), {}))
    assert calls.count(3) == len(made) == 1  # fresh arguments for each call: one call a use
    timed.undo()
    assert type(fixture) is Fixture


class _LibcBefore234:
    """The program's symbols as glibc < 2.34 has them: no timer_create (it is in librt)."""

    def __init__(self, real: Any) -> None:
        self._real = real

    def __getattr__(self, name: str) -> Any:
        if name == "timer_create":
            raise AttributeError(name)
        return getattr(self._real, name)


def test_the_worker_timer_finds_timer_create_in_librt(monkeypatch):
    # Without it the worker fell back to ITIMER_PROF, a CPU-time timer, under which the
    # process's CPU clock timing each run advances only at the kernel's ticks (4 ms here).
    real = worker_sampler.ctypes.CDLL

    def cdll(name: str | None, **kwargs: Any) -> Any:
        return _LibcBefore234(real(None, **kwargs)) if name is None else real(name, **kwargs)

    monkeypatch.setattr(worker_sampler.ctypes, "CDLL", cdll)
    timer = worker_sampler.FineTimer()
    assert timer.libc is not None
    timer.arm(0.5)  # the POSIX timer, not setitimer: ITIMER_PROF stays unarmed
    try:
        assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)
    finally:
        timer.disarm()
