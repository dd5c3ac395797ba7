"""The JSON profile (schema documented in docs/json-schema.md): what CI and other tools read."""

from __future__ import annotations

import json
import os
from typing import Any

from .atomic_write import write_text_atomic
from .model import SCHEMA_VERSION, LineKey, LineStats, SessionProfile, TestProfile


def _round(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, list):
        return [_round(v) for v in value]
    if isinstance(value, dict):
        return {k: _round(v) for k, v in value.items()}
    return value


def line_to_dict(key: LineKey, stats: LineStats) -> dict[str, Any]:
    data: dict[str, Any] = {
        "file": key.file,
        "line": key.line,
        "function": key.function,
        "function_line": stats.function_line,
        "cpu_python_s": stats.cpu_python_s,
        "cpu_native_s": stats.cpu_native_s,
        "cpu_system_s": stats.cpu_system_s,
        "samples": stats.samples,
    }
    data.update(stats.extra)
    return _round(data)


def test_to_dict(profile: TestProfile) -> dict[str, Any]:
    data: dict[str, Any] = {
        "outcome": profile.outcome,
        "elapsed_s": profile.elapsed_s,
        "cpu_python_s": profile.cpu_python_s,
        "cpu_native_s": profile.cpu_native_s,
        "cpu_system_s": profile.cpu_system_s,
    }
    data.update(profile.extra)
    data["lines"] = [line_to_dict(k, profile.lines[k]) for k in sorted(profile.lines)]
    return _round(data)


def session_to_dict(session: SessionProfile) -> dict[str, Any]:
    return {
        "schema": SCHEMA_VERSION,
        "interval_s": session.interval_s,
        "clock": session.clock,
        "notes": list(session.notes),
        "tests": {nodeid: test_to_dict(t) for nodeid, t in session.tests.items()},
    }


def write_json(session: SessionProfile, path: str | os.PathLike[str]) -> None:
    write_text_atomic(path, json.dumps(session_to_dict(session), indent=1) + "\n")
