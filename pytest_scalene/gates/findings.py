"""What a comparison finds: one `Finding` per verdict or note, and the `Comparison` that holds
them with how the lines were matched (gates/comparison.py makes them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core.verdict import REGRESSION, Verdict

JUDGED = ("regression", "ok")  # the findings that are verdicts; the others are notes


@dataclass(frozen=True)
class Finding:
    # "regression" (fails the test), "ok" (a test total within the rule), and, reported but
    # never failed: "improved", "new_line", "vanished_line", "not_compared"
    kind: str
    metric: str
    baseline: float | None
    value: float | None
    message: str
    line: str | None = None  # "file:line function"
    limit: float | None = None  # judged findings: the value above which it fails (compare sets it)

    @property
    def failed(self) -> bool:
        return self.kind == "regression"

    def verdict(self) -> Verdict | None:
        """The gate's verdict: for a judged finding ("regression" or "ok"), else None."""
        if self.kind not in JUDGED:
            return None
        return Verdict(
            REGRESSION,
            self.metric,
            self.limit,
            self.value,
            not self.failed,
            self.message,
            self.line,
            self.baseline,
        )


@dataclass
class Comparison:
    findings: list[Finding] = field(default_factory=list)
    matched_by_text: int = 0
    matched_by_offset: int = 0
    new_lines: int = 0
    vanished_lines: int = 0

    @property
    def regressions(self) -> list[Finding]:
        return [f for f in self.findings if f.failed]
