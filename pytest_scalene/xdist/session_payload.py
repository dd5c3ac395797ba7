"""pytest-xdist: each worker sends its tests' profiles (verdicts included) to the controller,
which merges them and alone writes the JSON, the baselines and the Markdown summary.

The worker serialises with the profile codec (core/codec.py) into `workeroutput` at the end of its
session; the controller reads it in pytest_testnodedown.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ..core.codec import profile_from_dict, test_to_dict
from ..core.model import SessionProfile

OUTPUT_KEY = "pytest_scalene"


def send(config: pytest.Config, session: SessionProfile) -> None:
    """On a worker: hand this worker's profiles to the controller."""
    payload = {
        "notes": list(session.notes),
        "tests": {nodeid: test_to_dict(p) for nodeid, p in session.tests.items()},
    }
    config.workeroutput[OUTPUT_KEY] = json.dumps(payload)  # type: ignore[attr-defined]


def receive(workeroutput: dict[str, Any], session: SessionProfile) -> None:
    """On the controller: merge one worker's profiles into the session."""
    text = workeroutput.get(OUTPUT_KEY)
    if not text:
        return
    payload = json.loads(text)
    for note in payload.get("notes", []):
        if note not in session.notes:
            session.notes.append(note)
    for nodeid, data in payload.get("tests", {}).items():
        session.tests[nodeid] = profile_from_dict(nodeid, data)
