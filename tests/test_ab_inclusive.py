"""A/B figures per function, inclusive and self (pytest_scalene/ab/): the sampler charges each
sample to every distinct function of the tree on the thread's stack (inclusive) beside the
innermost one (self); the report shows the inclusive ratio first, the one timeit would show,
while the function rule still judges self shares. Fake frames and synthetic runs: fast and
deterministic."""

from __future__ import annotations

import signal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_scalene.ab import worker

PROJECT = """
def inner(sample):
    return sample()


def outer(sample):
    sample()
    return inner(sample)


def recursive(n, sample):
    return outer(sample) if n == 0 else recursive(n - 1, sample)
"""


def project(tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "proj.py"
    path.write_text(PROJECT)
    namespace: dict[str, Any] = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    return namespace


@pytest.fixture(autouse=True)
def sigprof_restored() -> Any:
    """start() installs the sampler's SIGPROF handler: the next tests get theirs back."""
    previous = signal.getsignal(signal.SIGPROF)
    yield
    signal.signal(signal.SIGPROF, previous)


def frame(code: Any, back: Any = None) -> Any:
    return SimpleNamespace(f_code=code, f_lineno=code.co_firstlineno + 1, f_lasti=-1, f_back=back)


def chain(*codes: Any) -> Any:
    """A stack of fake frames, innermost first."""
    top = None
    for code in reversed(codes):
        top = frame(code, top)
    return top


def test_an_outer_functions_inclusive_time_holds_its_callees_and_recursion_counts_once(tmp_path):
    code = {name: f.__code__ for name, f in project(tmp_path).items() if callable(f)}
    library = compile("def call():\n    pass\n", "/usr/lib/python3/json/__init__.py", "exec")
    sampler = worker.LineSampler(str(tmp_path))
    # inner (in a library call) <- outer <- recursive x3; then outer's own line <- recursive x3
    sampler._charge(chain(library, code["inner"], code["outer"], *[code["recursive"]] * 3), 0.25)
    sampler._charge(chain(code["outer"], *[code["recursive"]] * 3), 0.5)
    assert sampler.take_run() == [["proj.py", "inner", 0.25, 1], ["proj.py", "outer", 0.5, 1]]
    assert sampler.take_inclusive() == [
        ["proj.py", "inner", 0.25, 1],
        ["proj.py", "outer", 0.75, 2],  # its own sample and inner's
        ["proj.py", "recursive", 0.75, 2],  # once per sample, not once per frame
    ]
    sampler.timer = SimpleNamespace(arm=lambda interval: None, disarm=lambda: None)
    sampler.start()  # each run starts from nothing
    sampler.stop()
    assert sampler.take_inclusive() == []


def test_the_run_reply_carries_both_figures(tmp_path):
    functions = project(tmp_path)
    served = worker.Worker.__new__(worker.Worker)
    served.sampler = worker.LineSampler(str(tmp_path))
    served.sampler.timer = SimpleNamespace(arm=lambda interval: None, disarm=lambda: None)

    def sample() -> None:  # the run's only samples: the timer does nothing
        served.sampler._sample(0, None)

    item = SimpleNamespace(runtest=lambda: functions["recursive"](2, sample))
    reply = served._run(item, 1)  # type: ignore[arg-type]
    assert reply["outcome"] == "passed" and "sampler_error" not in reply, reply
    counts = {q: n for _, q, _, n in reply["inclusive"]}
    assert counts == {"inner": 1, "outer": 2, "recursive": 2}, reply
    assert {q: n for _, q, _, n in reply["functions"]} == {"inner": 1, "outer": 1}, reply
    seconds = {q: s for _, q, s, _ in reply["inclusive"]}
    own = {q: s for _, q, s, _ in reply["functions"]}
    assert seconds["outer"] == pytest.approx(own["outer"] + own["inner"], abs=2e-7)
