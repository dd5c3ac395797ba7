"""A/B figures per function, inclusive and self (pytest_scalene/compare_ref/): the sampler charges
each sample to every distinct function of the tree on the thread's stack (inclusive) beside the
innermost one (self); the report shows the inclusive ratio first, the one timeit would show,
while the function rule still judges self shares (the inclusive ratio only vetoes). Fake frames
and synthetic runs: fast and deterministic."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_scalene.compare_ref import (
    ab_run,
    ab_statistic,
    pairs,
    ref_judge,
    worker,
    worker_sampler,
    workers,
)

# start() installs the line sampler's SIGPROF handler: later tests get theirs back.
pytestmark = pytest.mark.usefixtures("sigprof_restored")

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
    sampler = worker_sampler.LineSampler(str(tmp_path))
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
    served.sampler = worker_sampler.LineSampler(str(tmp_path))
    served.sampler.timer = SimpleNamespace(arm=lambda interval: None, disarm=lambda: None)

    def sample() -> None:  # the run's only samples: the timer does nothing
        served.sampler._sample(0, None)

    call = SimpleNamespace(pytest_runtest_call=lambda item: item.runtest())  # pytest's hook
    item = SimpleNamespace(
        runtest=lambda: functions["recursive"](2, sample), ihook=call, _report_sections=[]
    )
    reply = served._run(item, 1)  # type: ignore[arg-type]
    assert reply["outcome"] == "passed" and "sampler_error" not in reply, reply
    counts = {q: n for _, q, _, n in reply["inclusive"]}
    assert counts == {"inner": 1, "outer": 2, "recursive": 2}, reply
    assert {q: n for _, q, _, n in reply["functions"]} == {"inner": 1, "outer": 1}, reply
    seconds = {q: s for _, q, s, _ in reply["inclusive"]}
    own = {q: s for _, q, s, _ in reply["functions"]}
    assert seconds["outer"] == pytest.approx(own["outer"] + own["inner"], abs=2e-7)


# Per run of each side, (cpu_s, samples): `slowed` doubles its own time (0.1 -> 0.2 s) and
# calls `helper`, unchanged (0.1 s): as timeit would time it, slowed went 0.2 -> 0.3 s, 1.5x,
# while its own lines read 2x. `rest` (0.8 s) is unchanged; the test reads 1.1x.
SELF = {"base": {"slowed": 0.1, "helper": 0.1, "rest": 0.8}, "cur": {"slowed": 0.2}}
INCLUSIVE = {"base": {"slowed": 0.2, "helper": 0.1, "rest": 0.8}, "cur": {"slowed": 0.3}}


def runs(figures: dict[str, dict[str, float]], side: str, n: int = 10) -> list[Any]:
    seconds = {**figures["base"], **(figures["cur"] if side == "cur" else {})}
    return [{("mylib.py", f): (s, round(s * 2000)) for f, s in seconds.items()}] * n


def outcome_of(ratios: list[float], inclusive: bool = True) -> pairs.Outcome:
    outcome = pairs.Outcome("test_a.py::test_x", ratios=ratios)
    outcome.baseline_cpu_s, outcome.cpu_s = [1.0] * len(ratios), [r for r in ratios]
    outcome.baseline_runs, outcome.current_runs = runs(SELF, "base"), runs(SELF, "cur")
    if inclusive:
        outcome.baseline_inclusive = runs(INCLUSIVE, "base")
        outcome.current_inclusive = runs(INCLUSIVE, "cur")
    return outcome


def test_a_failing_function_shows_its_inclusive_ratio_first_and_labels_both(tmp_path):
    outcome = outcome_of([1.1] * 10)
    outcome.verdict = pairs.decide(outcome)
    assert outcome.verdict == "fail"
    outcome.function_lines[("mylib.py", "slowed")] = ab_statistic.LineGrowth(
        "mylib.py", "slowed", 12, 0.1, 0.2
    )
    setup = ab_run.Setup(root=tmp_path, rootdir=tmp_path, commit="0" * 40, ref="HEAD")
    result = ref_judge.result_of(outcome, setup)
    slowed = result["functions"][0]
    assert (slowed["function"], slowed["verdict"]) == ("slowed", "fail"), result["functions"]
    assert slowed["inclusive_ratio"] == pytest.approx(1.5, abs=1e-4)
    assert slowed["self_ratio"] == pytest.approx(2.0, abs=1e-4)
    assert slowed["ratio"] == slowed["self_ratio"]  # as before, for readers of older JSON
    # Every run alike: the share has no spread and its z is infinite, written as null (the JSON
    # report is strict JSON, which has no Infinity)
    assert slowed["z"] is None and json.loads(json.dumps(result, allow_nan=False)) == result
    message = ref_judge.verdict_of(result).message  # type: ignore[union-attr]
    assert "slower function: mylib.py:12 slowed inclusive 1.500x, self 2.000x (" in message
    assert "fails above 1.10x" in message


def test_the_function_rule_still_judges_self_shares_alone():
    """The inclusive figures only veto a failure (the next test): where the inclusive ratio is
    above the threshold too, the rule's states, ratios and z are the same with them or
    without (its false-failure rate was measured on self shares)."""
    for ratios in ([1.1] * 10, [1.0] * 20, [0.95] * 40):
        without = outcome_of(list(ratios), inclusive=False)
        with_them = outcome_of(list(ratios))
        assert pairs.decide(with_them) == pairs.decide(without)
        judged = [(f.function, f.state, f.ratio, f.z) for f in with_them.functions]
        assert judged == [(f.function, f.state, f.ratio, f.z) for f in without.functions]
        assert all(f.inclusive_ratio is None for f in without.functions)
        assert all(math.isfinite(f.inclusive_ratio or math.nan) for f in with_them.functions)


class FakeWorker:
    """A worker that answers every run with fixed per-function figures."""

    def __init__(self, name: str) -> None:
        self.side = SimpleNamespace(name=name)
        side = "base" if name == "baseline" else "cur"
        self.functions = [[*k, *v] for r in runs(SELF, side, 1) for k, v in r.items()]
        self.inclusive = [[*k, *v] for r in runs(INCLUSIVE, side, 1) for k, v in r.items()]
        self.cpu_s = 1.0 if side == "base" else 1.1

    def request(self, message: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        if message["cmd"] == "lines":
            return {"lines": [["mylib.py", "slowed", 12, 0.1]]}
        if message["cmd"] != "run":
            return {"outcome": "passed"}
        reply = {"outcome": "passed", "cpu_s": self.cpu_s * message["inner"]}
        return {**reply, "functions": self.functions, "inclusive": self.inclusive}


def test_the_pairs_pool_each_sides_inclusive_figures(monkeypatch):
    monkeypatch.setattr(pairs, "pair_cpu", lambda: None)  # no real processes to pin
    bases = [FakeWorker("baseline") for _ in range(workers.WORKERS_PER_SIDE)]
    currents = [FakeWorker("current") for _ in range(workers.WORKERS_PER_SIDE)]
    outcome = pairs.compare_test("test_a.py::test_x", None, bases, currents)  # type: ignore[arg-type]
    assert outcome.verdict == "fail" and len(outcome.current_inclusive) == len(outcome.ratios)
    assert outcome.workers == workers.WORKERS_PER_SIDE  # the function rule's units of error
    slowed = next(f for f in outcome.functions if f.function == "slowed")
    assert slowed.inclusive_ratio == pytest.approx(1.5) and slowed.ratio == pytest.approx(2.0)


def test_a_function_whose_own_lines_grew_but_not_its_inclusive_time_has_moved():
    # Its own share grows 1.5x, clearly (every run alike), while the callee's falls as much: as
    # timeit would read the function (callees included), it did not change.
    def sides(own: float) -> tuple[list, list]:
        self_runs = [{("m.py", "caller"): (own, 100), ("m.py", "callee"): (1.0 - own, 100)}] * 20
        inclusive = [{("m.py", "caller"): (1.0, 200), ("m.py", "callee"): (1.0 - own, 100)}] * 20
        return self_runs, inclusive

    (base, base_inclusive), (current, current_inclusive) = sides(0.2), sides(0.3)
    judged = {
        f.function: f
        for f in ab_statistic.judge_functions(
            [1.0] * 20, base, current, baseline_inclusive=base_inclusive,
            current_inclusive=current_inclusive,
        )
    }  # fmt: skip
    caller = judged["caller"]
    assert caller.ratio == pytest.approx(1.5) and caller.z > ab_statistic.FUNCTION_Z
    assert caller.inclusive_ratio == pytest.approx(1.0)
    assert caller.state == "moved"
    # Without inclusive figures (an older worker) the self rule alone decides, as before.
    alone = {f.function: f for f in ab_statistic.judge_functions([1.0] * 20, base, current)}
    assert alone["caller"].state == "fail"
