"""Whether a timed CPU comparison could have caught a doubling; the session's line that
counts those that could not, and the gate's verdict on them: not judged.

The stored times and the history judge a test's sampled CPU time within its noise rule
(docs/baselines.md): a short test's comparison passes whatever the slowdown below its limit
(a test of milliseconds fails only above 0.09 s of CPU). Such a pass is not a judgement: on a
third-party suite of millisecond tests a 1.5x slowdown passed every test unremarked. Each
comparison records its limit; a test whose CPU no gate of the run could gate (no A/B comparison
judged it either) is not judged, and the run fails with exit status 7 unless the user accepts
ungated CPU (--profile-allow-ungated-cpu) or any unjudged test (--profile-allow-unjudged).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..core import extra_keys
from ..core.model import TestProfile
from ..core.verdict import Verdict
from .metrics import METRICS
from .pipeline import Unjudged

# A comparison that could fail only at this many times its baseline or above cannot gate CPU.
BLIND_FACTOR = 2.0
ALLOW_OPTION = "--profile-allow-ungated-cpu"


def of_verdicts(verdicts: Sequence[Verdict]) -> dict[str, float | bool]:
    """The keys a gate adds to its per-test record (`baseline`, `history` in the JSON) where it
    compared the test's CPU time: the value above which it fails, and whether that could have
    failed a doubling (a regression, or a limit under BLIND_FACTOR x the baseline)."""
    cpu = next((v for v in verdicts if v.metric == "cpu_s" and v.line is None), None)
    if cpu is None or cpu.limit is None or cpu.baseline is None:
        return {}  # not compared: counted instead, a warm-up on one side, nothing to compare
    gated = cpu.failed or float(cpu.limit) < BLIND_FACTOR * cpu.baseline
    return {"cpu_fails_above_s": float(cpu.limit), "cpu_gated": gated}


def session_note(profiles: Iterable[TestProfile], key: str, judged_by: str) -> str | None:
    """The line naming how many of the tests `judged_by` compared (their records under
    extra[`key`]) it could not gate on CPU; from the profiles, which an xdist controller
    receives from its workers. None where it could gate every one."""
    compared, blind = 0, []
    for profile in profiles:
        record = profile.extra.get(key)
        if isinstance(record, dict) and "cpu_gated" in record:
            compared += 1
            if not record["cpu_gated"]:
                blind.append(float(record["cpu_fails_above_s"]))
    if not blind:
        return None
    return (
        f"CPU: {judged_by} could not have caught a {BLIND_FACTOR:g}x slowdown in {len(blind)} "
        f"of {compared} compared tests, too short for sampled CPU time (none of them fails "
        f"below {METRICS['cpu_s'].format(min(blind))} of CPU; docs/baselines.md, the noise "
        "rule): their CPU is not gated; gate it with --profile-compare-ref=REF or "
        f"--profile-measure=instructions, or accept it with {ALLOW_OPTION}."
    )


def unjudged(profile: TestProfile, key: str, gate: str, allowed: bool) -> Unjudged | None:
    """The gate `gate`, whose record is extra[`key`], as not judged where it compared the test's
    CPU time and could not have caught a doubling, and no A/B comparison judged the test's CPU
    instead (an A/B record without a note). `allowed`: the user accepts ungated CPU
    (ALLOW_OPTION), noted, not a failure."""
    record = profile.extra.get(key)
    if not isinstance(record, dict) or record.get("cpu_gated", True):
        return None
    ab = profile.extra.get(extra_keys.AB)
    if isinstance(ab, dict) and "note" not in ab:
        return None
    why = f"{gate}: too short for sampled CPU time to catch a {BLIND_FACTOR:g}x slowdown"
    if allowed:
        return Unjudged(f"{why} (accepted: {ALLOW_OPTION})", fails=False)
    return Unjudged(f"{why} ({ALLOW_OPTION} accepts that)")
