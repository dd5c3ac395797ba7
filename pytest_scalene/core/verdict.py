"""A gate's verdict on one test: what budgets (gates/budgets.py), the baseline comparison
(gates/comparison.py), the history (history/recent_runs.py) and the A/B comparison return, what the
profile keeps (TestProfile.verdicts; `verdicts` in docs/json-schema.md, written and read by
core/codec.py) and what every report shows, by field."""

from __future__ import annotations

from typing import Any, NamedTuple

BUDGET = "budget"  # a perf_budget limit (or a --profile-fail-on-leak / --profile-max-copy-mb-s)
REGRESSION = "regression"  # against a baseline, the history, or another git ref


class Verdict(NamedTuple):
    kind: str  # BUDGET or REGRESSION
    metric: str
    limit: float | bool | None  # the value above which it fails (None: not known)
    value: float | None  # None: the metric could not be measured (a failure)
    passed: bool
    message: str
    line: str | None = None  # "file:line function" of the line most responsible
    baseline: float | None = None  # what it was compared with (regressions only)

    @property
    def failed(self) -> bool:
        return not self.passed

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (docs/json-schema.md): a budget's has no `baseline` key."""
        data: dict[str, Any] = {"kind": self.kind, "metric": self.metric, "limit": self.limit}
        if self.kind != BUDGET:
            data["baseline"] = self.baseline
        data.update(value=self.value, passed=self.passed, message=self.message, line=self.line)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        return cls(
            kind=str(data.get("kind") or ""),
            metric=str(data.get("metric") or ""),
            limit=data.get("limit"),
            value=data.get("value"),
            passed=bool(data.get("passed", True)),
            message=data.get("message", ""),
            line=data.get("line"),
            baseline=data.get("baseline"),
        )
