"""Merging the JSON profiles of N CI shards (or runners) into one profile: the tests of every
shard, in shard order, with the notes of all and their counts of tests no gate could judge.
Shards must have run with the same sampling interval and clock (their figures would not compare
otherwise) and must not share a test."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..core.codec import profile_from_dict
from ..core.model import SCHEMA_VERSION, SessionProfile

UNFINISHED = (
    "unfinished:"  # json_report's checkpoint note on a profile written before its run ended
)


class MergeError(Exception):
    """Profiles that cannot be merged; str() names the file and the problem."""


def read_profile(path: str | os.PathLike[str]) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise MergeError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise MergeError(f"{path}: not a JSON profile (truncated or corrupt?): {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("tests"), dict):
        raise MergeError(f"{path}: not a pytest-scalene JSON profile (no 'tests' object)")
    schema = data.get("schema")
    if schema != SCHEMA_VERSION:
        raise MergeError(
            f"{path}: JSON profile schema {schema!r}; this version merges schema {SCHEMA_VERSION}"
        )
    for key, kind in (("interval_s", (int, float)), ("clock", str), ("notes", list)):
        if not isinstance(data.get(key), kind) or isinstance(data.get(key), bool):
            raise MergeError(f"{path}: key {key!r} is missing or of the wrong type")
    return data


def merge_profiles(paths: Sequence[str | os.PathLike[str]]) -> SessionProfile:
    """One session holding every shard's tests; a MergeError for a mismatch or an overlap."""
    if not paths:
        raise MergeError("no profile to merge")
    merged: SessionProfile | None = None
    origin: dict[str, str] = {}
    for path in paths:
        data = read_profile(path)
        if merged is None:
            merged = SessionProfile(float(data["interval_s"]), data["clock"])
            first = os.fspath(path)
        elif (float(data["interval_s"]), data["clock"]) != (merged.interval_s, merged.clock):
            raise MergeError(
                f"{path}: sampled with interval {data['interval_s']} s, clock {data['clock']}; "
                f"{first} with {merged.interval_s} s, {merged.clock}: run every shard with the "
                "same --profile-interval and --profile-clock"
            )
        for note in data["notes"]:
            if str(note).startswith(UNFINISHED):
                raise MergeError(
                    f"{path}: an unfinished profile (its run crashed or is still running): {note}"
                )
            if note not in merged.notes:
                merged.notes.append(note)
        for nodeid, test in data["tests"].items():
            if nodeid in origin:
                raise MergeError(
                    f"{path}: test {nodeid} is also in {origin[nodeid]}: shards must not "
                    "overlap (split the suite so that each test runs in one shard)"
                )
            if not isinstance(test, dict):
                raise MergeError(f"{path}: tests[{nodeid!r}] is not an object")
            origin[nodeid] = os.fspath(path)
            merged.tests[nodeid] = profile_from_dict(nodeid, test)
        _add_unjudged(merged.unjudged, data, path)
    assert merged is not None
    return merged


def _add_unjudged(into: list[dict[str, Any]], data: dict[str, Any], path: Any) -> None:
    """A shard's `unjudged` entries added to the merged counts, per gate (absent from profiles
    written before 2026-11-28)."""
    entries = data.get("unjudged", [])
    if not isinstance(entries, list):
        raise MergeError(f"{path}: key 'unjudged' is not a list")
    for entry in entries:
        fields = entry if isinstance(entry, dict) else {}
        gate, tests, fails = fields.get("gate"), fields.get("tests"), fields.get("fails")
        if not (isinstance(gate, str) and isinstance(tests, int) and isinstance(fails, bool)):
            raise MergeError(f"{path}: an 'unjudged' entry is not a gate's count: {entry!r}")
        same = next((e for e in into if (e["gate"], e["fails"]) == (gate, fails)), None)
        if same is None:
            into.append({"gate": gate, "tests": tests, "fails": fails})
        else:
            same["tests"] += tests
