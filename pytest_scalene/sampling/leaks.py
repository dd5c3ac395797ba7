"""Leak scores (the Scalene 2023 paper, section 3.4).

At each new high-water mark of the footprint the shim tracks the allocation that set it and
notes whether it is freed. A line with `mallocs` tracked allocations of which `frees` were freed
by the end of the test leaks with probability 1 - (frees + 1) / (mallocs + 2): Laplace's rule
of succession, the chance that the next tracked allocation is not freed either. (The paper
prints the denominator as mallocs - frees + 2, which goes below 0 once most tracked allocations
are freed, e.g. -4.5 for 10 of 10; both agree when none is freed.) Lines above 0.95 are
reported, only when the test's footprint grew by at least 1%, with a rate: the MB the line grew
the footprint by / the test's time.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.model import LineKey

REPORT_PROBABILITY = 0.95
MIN_GROWTH = 0.01  # of the footprint at the start of the test


def leak_probability(mallocs: int, frees: int) -> float:
    if mallocs < 0 or not 0 <= frees <= mallocs:
        raise ValueError(f"need 0 <= frees <= mallocs, got frees={frees}, mallocs={mallocs}")
    return 1.0 - (frees + 1) / (mallocs + 2)


@dataclass(frozen=True)
class LineEvidence:
    key: LineKey
    mallocs: int  # tracked allocations charged to the line
    frees: int  # of those, freed by the end of the test
    grown_mb: float  # net growth charged to the line

    @property
    def probability(self) -> float:
        return leak_probability(self.mallocs, self.frees)


def footprint_grew(start_bytes: int, end_bytes: int) -> bool:
    """True when the footprint grew by at least MIN_GROWTH over the test."""
    return end_bytes - start_bytes >= MIN_GROWTH * max(start_bytes, 1)


def report(evidence: list[LineEvidence], grew: bool, elapsed_s: float) -> list[dict]:
    """The test's `leaks` entries, most likely and fastest first."""
    if not grew:
        return []
    leaks = [
        {
            "file": e.key.file,
            "line": e.key.line,
            "probability": e.probability,
            "rate_mb_s": rate_mb_s(e.grown_mb, elapsed_s),
        }
        for e in evidence
        if e.probability > REPORT_PROBABILITY
    ]
    leaks.sort(key=lambda leak: (-leak["probability"], -leak["rate_mb_s"]))
    return leaks


def rate_mb_s(grown_mb: float, elapsed_s: float) -> float:
    return max(grown_mb, 0.0) / elapsed_s if elapsed_s > 0 else 0.0
