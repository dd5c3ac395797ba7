"""What the HTML page embeds besides the profile's JSON: the profiled files' source text (for the
source view), the per-line diff of each failed test against its stored baseline, and the sampled
call stacks when they were recorded (for the flame graphs).

None of it is in the JSON schema (docs/json-schema.md): the page is the only reader, and these
blocks are documented with it in docs/reports.md.
"""

from __future__ import annotations

import linecache
from typing import Any

from ..core.model import SessionProfile
from ..core.source import source_path
from ..gates.baseline_entry import entry_from_profile
from ..gates.line_matching import match_lines
from ..sampling.stack_recorder import StackRecorder
from .stored_baselines import Baselines

# Whole files up to this many lines are embedded; a longer one (a generated module) keeps only
# the lines near profiled ones, so one file cannot make the page megabytes larger.
MAX_FILE_LINES = 5000
CONTEXT = 8  # lines kept either side of a profiled line in a file cut that way
MAX_LINE_CHARS = 400


def _profiled_lines(session: SessionProfile) -> dict[str, set[int]]:
    found: dict[str, set[int]] = {}
    for profile in session.tests.values():
        for key in profile.lines:
            found.setdefault(key.file, set()).add(key.line)
    return found


def source_files(session: SessionProfile, rootdir: str) -> dict[str, list[str | None]]:
    """{file: [text of line 1, line 2, ...]} for every file with a profiled line; `None` for a
    line left out (a long file keeps only the lines near profiled ones; [] when unreadable)."""
    out: dict[str, list[str | None]] = {}
    for file, numbers in sorted(_profiled_lines(session).items()):
        texts = [
            t.rstrip("\r\n")[:MAX_LINE_CHARS]
            for t in linecache.getlines(source_path(rootdir, file))
        ]
        if len(texts) > MAX_FILE_LINES:
            keep = {n + d for n in numbers for d in range(-CONTEXT, CONTEXT + 1)}
            out[file] = [t if i + 1 in keep else None for i, t in enumerate(texts)]
        else:
            out[file] = list(texts)
    return out


def baseline_diffs(session: SessionProfile, rootdir: str) -> dict[str, Any]:
    """Each compared test's lines paired with its stored baseline's (gates/line_matching.py, as
    the comparison pairs them), each row [file, line, function, baseline metrics or None (new),
    current metrics or None (vanished)], metrics the compared ones (gates/metrics.py).

    {"tests": {nodeid: {metrics, commit, lines}}} for the tests with a failed gate, and
    {"suite": {tests, lines: [[file, line, function, baseline cpu_s, cpu_s]]}}: every compared
    test's CPU seconds per line added up, for the suite's differential flame graph."""
    baselines = Baselines(rootdir)
    failed: dict[str, dict[str, Any]] = {}
    suite: dict[tuple[str, int, str], list[float]] = {}
    compared = 0
    for nodeid, profile in session.tests.items():
        entry = baselines.entry(profile)
        if entry is None:
            continue
        compared += 1
        current = entry_from_profile(profile, rootdir)
        pairs, _, new, vanished = match_lines(entry.lines, current.lines)
        rows = [[c.file, c.line, c.function, b.metrics, c.metrics] for b, c in pairs]
        rows += [[c.file, c.line, c.function, None, c.metrics] for c in new]
        rows += [[b.file, b.line, b.function, b.metrics, None] for b in vanished]
        for file, line, function, before, now in rows:
            sums = suite.setdefault((file, line, function), [0.0, 0.0])
            sums[0] += (before or {}).get("cpu_s", 0.0)
            sums[1] += (now or {}).get("cpu_s", 0.0)
        if any(v.failed for v in profile.verdicts):
            failed[nodeid] = {"metrics": entry.metrics, "commit": entry.commit, "lines": rows}
    lines = [[*key, round(b, 6), round(n, 6)] for key, (b, n) in sorted(suite.items()) if b or n]
    return {"tests": failed, "suite": {"tests": compared, "lines": lines}}


def stack_data(session: SessionProfile, recorder: StackRecorder | None) -> dict[str, Any] | None:
    """The recorded stacks as {frames: [[name, file, line]], tests: {nodeid: [[stack, seconds]]}},
    weighted as the speedscope export weighs them (CPU seconds; samples x interval on the wall
    clock); None when no stacks were recorded."""
    if recorder is None or not recorder.tests:
        return None
    wall = session.clock == "wall"
    tests = {
        nodeid: [
            [list(stack), round(c.samples * session.interval_s if wall else c.cpu_s, 6)]
            for stack, c in test.stacks.items()
        ]
        for nodeid, test in recorder.tests.items()
        if nodeid in session.tests
    }
    frames = [[f.name, f.file, f.line] for f in recorder.frames]
    return {"frames": frames, "tests": tests}


def recorder_from_speedscope(doc: dict[str, Any], interval_s: float) -> StackRecorder:
    """The stacks of a --profile-speedscope file (reports/speedscope.py) as a recorder, so that a
    page built later from the JSON profile draws the same flame graphs; sample counts are the
    weights over the interval (the file keeps weights only)."""
    frames = [[f["name"], f.get("file", ""), f.get("line", 0)] for f in doc["shared"]["frames"]]
    tests = {
        p["name"]: [
            [stack, round(w / interval_s) if interval_s > 0 else 0, w]
            for stack, w in zip(p["samples"], p["weights"], strict=True)
        ]
        for p in doc["profiles"]
    }
    recorder = StackRecorder(scope=None)  # type: ignore[arg-type]  # only merged into, not sampling
    recorder.merge_payload({"frames": frames, "tests": tests})
    return recorder
