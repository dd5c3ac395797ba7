"""gates/pipeline.py's judge_report, the one place a report fails: every judge's verdicts on the
profile in the judges' order, every failed one in the failure text, a judge that raises failing
the test rather than passing it, and a failing test not judged at all."""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_scalene.core.model import TestProfile
from pytest_scalene.core.verdict import BUDGET, REGRESSION, Verdict
from pytest_scalene.gates.pipeline import judge_report


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
    asked: int = 0

    def verdicts(self, item: object, profile: TestProfile) -> list[Verdict]:
        self.asked += 1
        if self.error is not None:
            raise self.error
        return list(self.found)

    def cpu_suspect(self, item: object, profile: TestProfile) -> str | None:
        return None


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
    assert judge.asked == 0 and profile.verdicts == [] and report.longrepr is None
