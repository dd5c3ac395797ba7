"""Leak scores (the Scalene 2023 paper, section 3.4), their confirmation, and memory retained.

At each new high-water mark of the footprint the shim tracks the allocation that set it and
notes whether it is freed. A line with `mallocs` tracked allocations of which `frees` were freed
by the end of the test leaks with probability 1 - (frees + 1) / (mallocs + 2): Laplace's rule
of succession, the chance that the next tracked allocation is not freed either. (The paper
prints the denominator as mallocs - frees + 2, which goes below 0 once most tracked allocations
are freed, e.g. -4.5 for 10 of 10; both agree when none is freed.) Lines above 0.95, when the
test's footprint grew by at least 1%, are suspects: a cache that fills once looks the same on a
first run, so a suspect is a likely leak only when running the test again grows the footprint
again at the same line (gates/leak_confirm.py); otherwise it is reported as held.

Retained memory: the test's net footprint growth, split across the lines holding the tracked
allocations still alive at its end; added up over the session it shows a leak spread thinly
over many tests, too small in each to score.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..core import extra_keys
from ..core.model import LineKey

REPORT_PROBABILITY = 0.95
MIN_GROWTH = 0.01  # of the footprint at the start of the test
# A re-run confirms a suspect when it retains at the same line at least this share of what the
# first run retained there: a real leak keeps about as much again, a filled cache about nothing.
CONFIRM_SHARE = 0.5
SESSION_RETAINED_MB = 10.0  # a line retaining this much over the session's tests is reported,
SESSION_MIN_TESTS = 2  # when spread over tests: what one test keeps is its own suspect's to judge
MB = 1 << 20

NOT_RUN_AGAIN = "not confirmed: the test did not pass, so it was not run again"
DID_NOT_GROW = "held (did not grow when run again)"


def leak_probability(mallocs: int, frees: int) -> float:
    if mallocs < 0 or not 0 <= frees <= mallocs:
        raise ValueError(f"need 0 <= frees <= mallocs, got frees={frees}, mallocs={mallocs}")
    return 1.0 - (frees + 1) / (mallocs + 2)


class LineEvidence(NamedTuple):
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


def report(
    evidence: list[LineEvidence],
    grew: bool,
    elapsed_s: float,
    retained: Mapping[tuple[str, int], float] | None = None,
) -> list[dict]:
    """The test's suspects, most likely and fastest first: `{file, line, function,
    probability, rate_mb_s, leaked_mb}` (`leaked_mb`: the line's share of `retained`)."""
    if not grew:
        return []
    retained = retained or {}
    leaks = [
        {
            "file": e.key.file,
            "line": e.key.line,
            "function": e.key.function,
            "probability": e.probability,
            "rate_mb_s": rate_mb_s(e.grown_mb, elapsed_s),
            "leaked_mb": retained.get((e.key.file, e.key.line), 0.0),
        }
        for e in evidence
        if e.probability > REPORT_PROBABILITY
    ]
    leaks.sort(key=lambda leak: (-leak["probability"], -leak["rate_mb_s"]))
    return leaks


def rate_mb_s(grown_mb: float, elapsed_s: float) -> float:
    return max(grown_mb, 0.0) / elapsed_s if elapsed_s > 0 else 0.0


def retained(net_bytes: int, held: Mapping[LineKey, int]) -> list[dict]:
    """The test's net footprint growth split across the lines in proportion to the tracked
    allocations each still holds (`held`), as `{file, line, function, mb}`, largest first.
    Nothing when the footprint did not grow or no line holds a tracked allocation."""
    total = sum(n for n in held.values() if n > 0)
    if net_bytes <= 0 or total == 0:
        return []
    found = [
        {"file": k.file, "line": k.line, "function": k.function, "mb": net_bytes * n / total / MB}
        for k, n in held.items()
        if n > 0
    ]
    found.sort(key=lambda r: (-r["mb"], r["file"], r["line"]))
    return found


def retained_at(extra: Mapping[str, Any]) -> dict[tuple[str, int], float]:
    """A profile's `retained` entries as (file, line) -> MB."""
    found: dict[tuple[str, int], float] = {}
    for entry in extra.get(extra_keys.RETAINED) or []:
        if isinstance(entry, dict):
            where = (str(entry.get("file")), int(entry.get("line", 0)))
            found[where] = found.get(where, 0.0) + float(entry.get("mb") or 0.0)
    return found


def confirmed(first_mb: float, again_mb: float) -> bool:
    """Whether a run of the test again retained, at the suspect's line, at least CONFIRM_SHARE of
    what the first run retained there (and anything at all)."""
    return again_mb > 0 and again_mb >= CONFIRM_SHARE * first_mb


@dataclass
class SessionLine:
    file: str
    line: int
    function: str
    mb: float = 0.0
    tests: int = 0


def session_retained(
    extras: Iterable[Mapping[str, Any]], min_mb: float = SESSION_RETAINED_MB
) -> list[SessionLine]:
    """Lines whose retained memory, added up over the tests (`extras`: each test's profile
    extra), reaches `min_mb` in SESSION_MIN_TESTS tests or more, largest first."""
    found: dict[tuple[str, int], SessionLine] = {}
    for extra in extras:
        for entry in extra.get(extra_keys.RETAINED) or []:
            if not isinstance(entry, dict):
                continue
            file, line = str(entry.get("file")), int(entry.get("line", 0))
            row = found.setdefault((file, line), SessionLine(file, line, ""))
            row.function = row.function or str(entry.get("function") or "")
            row.mb += float(entry.get("mb") or 0.0)
            row.tests += 1
    rows = [r for r in found.values() if r.mb >= min_mb and r.tests >= SESSION_MIN_TESTS]
    rows.sort(key=lambda r: (-r.mb, r.file, r.line))
    return rows
