"""gates/pipeline.py's judge_report, the one place a report fails: every judge's verdicts on the
profile in the judges' order, every failed one in the failure text, a judge that raises failing
the test rather than passing it, and a failing test not judged at all; and unjudged_counts, what
the end of the output says each gate could not judge."""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_scalene.core.model import TestProfile
from pytest_scalene.core.verdict import BUDGET, REGRESSION, Verdict
from pytest_scalene.gates.pipeline import Unjudged, judge_report, unjudged_counts


@dataclass
class Report:  # the fields of pytest.TestReport that judge_report reads and writes
    outcome: str = "passed"
    longrepr: str | None = None

    @property
    def passed(self) -> bool:
        return self.outcome == "passed"


@dataclass
class FakeJudge:
    found: list[Verdict] = field(default_factory=list)
    error: Exception | None = None
    confirms_cpu: bool = False
    every_test: bool = True
    asked: int = 0
    cannot_judge: dict[str, Unjudged] = field(default_factory=dict)  # by nodeid

    def verdicts(self, item: object, profile: TestProfile) -> list[Verdict]:
        self.asked += 1
        if self.error is not None:
            raise self.error
        return list(self.found)

    def cpu_suspect(self, item: object, profile: TestProfile) -> str | None:
        return None

    def unjudged(self, profile: TestProfile) -> Unjudged | None:
        return self.cannot_judge.get(profile.nodeid)


def _verdict(kind: str, passed: bool, message: str) -> Verdict:
    return Verdict(kind, "cpu_s", 1.0, 2.0 if not passed else 0.5, passed, message)


def test_every_judges_verdicts_in_order_and_every_failure_in_the_text():
    budget = FakeJudge([_verdict(BUDGET, False, "cpu_s over budget")])
    baseline = FakeJudge([_verdict(REGRESSION, True, "within baseline")])
    history = FakeJudge([_verdict(REGRESSION, False, "above history")])
    profile, report = TestProfile("t.py::t", outcome="passed"), Report()
    judge_report([budget, baseline, history], None, report, profile)  # type: ignore[arg-type]
    assert [v.message for v in profile.verdicts] == [
        "cpu_s over budget",
        "within baseline",
        "above history",
    ]
    assert report.outcome == profile.outcome == "failed"
    assert report.longrepr == "cpu_s over budget\nabove history"


def test_passing_verdicts_leave_the_report_passed():
    judge = FakeJudge([_verdict(BUDGET, True, "ok")])
    profile, report = TestProfile("t.py::t", outcome="passed"), Report()
    judge_report([judge], None, report, profile)  # type: ignore[arg-type]
    assert report.passed and profile.outcome == "passed" and len(profile.verdicts) == 1


def test_a_judge_that_raises_fails_the_test_and_the_others_still_judge():
    broken = FakeJudge(error=KeyError("peak_mb"))
    after = FakeJudge([_verdict(REGRESSION, True, "within baseline")])
    profile, report = TestProfile("t.py::t", outcome="passed"), Report()
    judge_report([broken, after], None, report, profile)  # type: ignore[arg-type]
    assert report.outcome == "failed"
    assert "could not check this test's gates: KeyError('peak_mb')" in str(report.longrepr)
    assert after.asked == 1 and [v.message for v in profile.verdicts] == ["within baseline"]


def test_a_failing_test_is_not_judged():
    judge = FakeJudge([_verdict(BUDGET, False, "over")])
    profile, report = TestProfile("t.py::t", outcome="failed"), Report(outcome="failed")
    judge_report([judge], None, report, profile)  # type: ignore[arg-type]
    assert judge.asked == 0 and not profile.verdicts and report.longrepr is None


def test_unjudged_counts_passing_tests_per_gate_those_that_fail_the_run_first():
    new = Unjudged("the A/B comparison, nothing to compare with", fails=False)
    ab, counts = Unjudged("the A/B comparison"), Unjudged("instruction counts")
    history = Unjudged("the history")
    profiles = [TestProfile(f"t.py::t{i}", outcome="passed") for i in range(4)]
    profiles.append(TestProfile("t.py::failed", outcome="failed"))
    judges = [
        FakeJudge(cannot_judge={"t.py::t0": new, "t.py::t1": ab, "t.py::t2": ab}),
        FakeJudge(cannot_judge={"t.py::t1": counts, "t.py::failed": counts}),
        FakeJudge(cannot_judge={"t.py::t3": history}),
    ]
    found = unjudged_counts(judges, profiles)  # type: ignore[arg-type]
    assert list(found.items()) == [(ab, 2), (counts, 1), (history, 1), (new, 1)]
    assert unjudged_counts(judges, profiles[4:]) == {}  # a failing test is never judged
