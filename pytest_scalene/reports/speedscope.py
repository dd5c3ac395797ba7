"""Export of the sampled stacks in speedscope's file format (https://www.speedscope.app), one
"sampled" profile per test, so that flame graphs open in speedscope and the tools that read it.

Samples are collapsed stacks with weights: CPU seconds on the cpu clock; on the wall clock, the
sample count times the interval (the main thread's wall time, waiting included). The stacks are
sorted by their frame names, so that speedscope's time-ordered view reads like a flame graph too.
"""

from __future__ import annotations

import json
import os
from importlib import metadata
from typing import Any

from ..core.atomic_write import write_text_atomic
from ..core.model import SessionProfile
from ..sampling.stack_recorder import StackRecorder

SCHEMA_URL = "https://www.speedscope.app/file-format-schema.json"


def _exporter() -> str:
    try:
        return f"pytest-scalene {metadata.version('pytest-scalene')}"
    except metadata.PackageNotFoundError:
        return "pytest-scalene"


def to_speedscope(session: SessionProfile, recorder: StackRecorder) -> dict[str, Any]:
    """The speedscope document for the tests that have sampled stacks, in run order."""
    profiles: list[dict[str, Any]] = []
    names = [frame.name for frame in recorder.frames]
    order = list(session.tests) + [n for n in recorder.tests if n not in session.tests]
    for nodeid in order:
        test = recorder.tests.get(nodeid)
        if test is None or not test.stacks:
            continue
        stacks = sorted(test.stacks.items(), key=lambda item: [names[i] for i in item[0]])
        if session.clock == "wall":
            weights = [counts.samples * session.interval_s for _, counts in stacks]
        else:
            weights = [counts.cpu_s for _, counts in stacks]
        profiles.append(
            {
                "type": "sampled",
                "name": nodeid,
                "unit": "seconds",
                "startValue": 0,
                "endValue": round(sum(weights), 6),
                "samples": [list(stack) for stack, _ in stacks],
                "weights": [round(w, 6) for w in weights],
            }
        )
    frames = [
        {"name": f.name, "file": f.file, "line": f.line} if f.file else {"name": f.name}
        for f in recorder.frames
    ]
    return {
        "$schema": SCHEMA_URL,
        "shared": {"frames": frames},
        "profiles": profiles,
        "name": f"pytest-scalene: {len(profiles)} tests ({session.clock} clock)",
        "activeProfileIndex": 0,
        "exporter": _exporter(),
    }


def write_speedscope(
    session: SessionProfile, recorder: StackRecorder, path: str | os.PathLike[str]
) -> None:
    write_text_atomic(path, json.dumps(to_speedscope(session, recorder), separators=(",", ":")))
