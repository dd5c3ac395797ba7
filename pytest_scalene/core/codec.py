"""The profile codec: a TestProfile (and a SessionProfile) to the dicts of the JSON schema
(docs/json-schema.md) and back. Everything that serialises a profile goes through here: the JSON
file and the checkpoint (reports/), the HTML page, the xdist transport (xdist/), the profiled
children (subprocesses/), the shards merged by the CLI and the history records."""

from __future__ import annotations

from typing import Any

from . import extra_keys
from .model import SCHEMA_VERSION, LineKey, LineStats, SessionProfile, TestProfile
from .verdict import Verdict

_TEST_FIELDS = ("outcome", "elapsed_s", "cpu_python_s", "cpu_native_s", "cpu_system_s", "lines")
_LINE_FIELDS = ("file", "line", "function", "function_line")
_LINE_CPU = ("cpu_python_s", "cpu_native_s", "cpu_system_s", "samples")


def rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, (list, tuple)):  # a tuple: in memory only (timelines, empty lists)
        return [rounded(v) for v in value]
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
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
    return rounded(data)


def test_to_dict(profile: TestProfile) -> dict[str, Any]:
    data: dict[str, Any] = {
        "outcome": profile.outcome,
        "elapsed_s": profile.elapsed_s,
        "cpu_python_s": profile.cpu_python_s,
        "cpu_native_s": profile.cpu_native_s,
        "cpu_system_s": profile.cpu_system_s,
    }
    data.update(profile.extra)
    if profile.verdicts:
        data[extra_keys.VERDICTS] = [v.to_dict() for v in profile.verdicts]
    data["lines"] = [line_to_dict(k, profile.lines[k]) for k in sorted(profile.lines)]
    return rounded(data)


def session_to_dict(session: SessionProfile) -> dict[str, Any]:
    found = {
        "schema": SCHEMA_VERSION,
        "interval_s": session.interval_s,
        "clock": session.clock,
        "notes": list(session.notes),
        "unjudged": [dict(entry) for entry in session.unjudged],
        "tests": {nodeid: test_to_dict(t) for nodeid, t in session.tests.items()},
    }
    if session.selection is not None:
        found["selection"] = session.selection
    return found


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
    """The inverse of test_to_dict (floats rounded as that writes them)."""
    profile = TestProfile(
        nodeid,
        outcome=data.get("outcome", "unknown"),
        elapsed_s=data.get("elapsed_s", 0.0),
        cpu_python_s=data.get("cpu_python_s", 0.0),
        cpu_native_s=data.get("cpu_native_s", 0.0),
        cpu_system_s=data.get("cpu_system_s", 0.0),
        extra={k: v for k, v in data.items() if k not in _TEST_FIELDS},
    )
    found = profile.extra.get(extra_keys.VERDICTS)
    if isinstance(found, list) and all(isinstance(v, dict) for v in found):
        profile.verdicts = [Verdict.from_dict(v) for v in profile.extra.pop(extra_keys.VERDICTS)]
    profile.lines.update(line_from_dict(line) for line in data.get("lines", []))
    return profile
