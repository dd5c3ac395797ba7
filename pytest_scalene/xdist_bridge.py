"""pytest-xdist: each worker sends its tests' profiles (verdicts included) to the controller,
which merges them and alone writes the JSON, the baselines and the Markdown summary.

The worker serialises with json_report.test_to_dict into `workeroutput` at the end of its
session; the controller reads it in pytest_testnodedown.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from .json_report import test_to_dict
from .model import LineKey, LineStats, SessionProfile, TestProfile

OUTPUT_KEY = "pytest_scalene"
_TEST_FIELDS = ("outcome", "elapsed_s", "cpu_python_s", "cpu_native_s", "cpu_system_s", "lines")
_LINE_FIELDS = ("file", "line", "function", "function_line")
_LINE_CPU = ("cpu_python_s", "cpu_native_s", "cpu_system_s", "samples")


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def line_from_dict(data: dict[str, Any]) -> tuple[LineKey, LineStats]:
    key = LineKey(data["file"], data["line"], data["function"])
    stats = LineStats(
        function_line=data.get("function_line", 0),
        cpu_python_s=data.get("cpu_python_s", 0.0),
        cpu_native_s=data.get("cpu_native_s", 0.0),
        cpu_system_s=data.get("cpu_system_s", 0.0),
        samples=data.get("samples", 0),
        extra={k: v for k, v in data.items() if k not in _LINE_FIELDS + _LINE_CPU},
    )
    return key, stats


def profile_from_dict(nodeid: str, data: dict[str, Any]) -> TestProfile:
    """The inverse of json_report.test_to_dict (floats rounded as that writes them)."""
    profile = TestProfile(
        nodeid,
        outcome=data.get("outcome", "unknown"),
        elapsed_s=data.get("elapsed_s", 0.0),
        cpu_python_s=data.get("cpu_python_s", 0.0),
        cpu_native_s=data.get("cpu_native_s", 0.0),
        cpu_system_s=data.get("cpu_system_s", 0.0),
        extra={k: v for k, v in data.items() if k not in _TEST_FIELDS},
    )
    profile.lines.update(line_from_dict(line) for line in data.get("lines", []))
    return profile


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
