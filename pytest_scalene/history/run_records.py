"""What one run stores: the run's identity (commit, machine, figure-changing options) and each
test's figures, verdicts and per-line figures, built from a SessionProfile."""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import struct
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from ..core import extra_keys
from ..core.codec import rounded
from ..core.git import git_or_none
from ..core.model import SessionProfile, TestProfile
from ..core.natural_values import is_number
from ..gates.metrics import METRICS

# Test totals kept as columns (queried for trends and history verdicts). They are the store's
# schema (schema.py), so they are named here rather than derived from METRICS: a new metric needs
# a migration before it gets a column.
CPU_COLUMNS = ("elapsed_s", "cpu_s", "cpu_python_s", "cpu_native_s", "cpu_system_s")
METRIC_COLUMNS = ("peak_mb", "alloc_mb", "copy_mb", "copy_mb_s", "gpu_peak_mb", "leaks")
TEST_METRICS = CPU_COLUMNS + METRIC_COLUMNS
# Per-line figures, packed as float32 (NaN: not measured) after the line's key id.
LINE_METRICS = ("cpu_s", "peak_mb", "alloc_mb", "copy_mb")
_LINE_ROW = struct.Struct("<I" + "f" * len(LINE_METRICS))


@dataclass(frozen=True)
class LineRecord:
    file: str
    line: int
    function: str
    metrics: tuple[float | None, ...]  # in LINE_METRICS order


@dataclass(frozen=True)
class TestRecord:
    __test__ = False  # not a pytest test class

    nodeid: str
    outcome: str
    metrics: dict[str, float | None]  # TEST_METRICS
    verdicts: list[dict[str, Any]]
    lines: tuple[LineRecord, ...]
    machine_s: float | None = None  # the machine's speed beside the test (gates/machine_speed.py)

    @property
    def gates(self) -> str:
        """ "failed", "passed" or "none": the verdicts' summary, queried without parsing JSON."""
        if not self.verdicts:
            return "none"
        return "failed" if any(not v.get("passed", True) for v in self.verdicts) else "passed"


@dataclass(frozen=True)
class RunRecord:
    run_uuid: str
    started_at: float  # Unix time
    commit: str | None
    branch: str | None
    dirty: bool | None
    machine: str  # fingerprint (a short hash of `machine_info`)
    machine_info: dict[str, Any]
    options: dict[str, Any]  # the options that change figures; runs compare only when equal
    tests: tuple[TestRecord, ...]
    notes: tuple[str, ...] = field(default=())
    code_map: str | None = None  # the run's code map, as its JSON file holds it


# -- identity ------------------------------------------------------------------------------------
def git_state(rootdir: str) -> tuple[str | None, str | None, bool | None]:
    """(commit, branch, dirty). CI checkouts are often detached: the branch then comes from the
    CI's variables (GitHub Actions, GitLab CI) when set."""
    commit = git_or_none(rootdir, "rev-parse", "HEAD")
    if commit is None:
        return None, None, None
    branch = git_or_none(rootdir, "rev-parse", "--abbrev-ref", "HEAD")
    if branch in (None, "HEAD"):
        env = os.environ
        branch = env.get("GITHUB_HEAD_REF") or env.get("GITHUB_REF_NAME")
        branch = branch or env.get("CI_COMMIT_REF_NAME") or None
    status = git_or_none(rootdir, "status", "--porcelain", "--untracked-files=no")
    return commit, branch, None if status is None else bool(status)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gb() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def machine_info() -> dict[str, Any]:
    """What makes timings comparable: hardware and Python, not the host name (CI runners of one
    type get a new name every job but time alike)."""
    return {
        "arch": platform.machine(),
        "cpu": _cpu_model(),
        "cpus": os.cpu_count(),
        "memory_gb": _memory_gb(),
        "system": platform.system(),
        "python": f"{sys.implementation.name} {sys.version_info[0]}.{sys.version_info[1]}",
    }


def fingerprint(info: dict[str, Any]) -> str:
    text = json.dumps(info, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


# -- figures -------------------------------------------------------------------------------------
def _number(value: Any) -> float | None:
    if not is_number(value):
        return None
    return float(value) if math.isfinite(value) else None


def test_record(profile: TestProfile) -> TestRecord:
    metrics: dict[str, float | None] = {
        "elapsed_s": profile.elapsed_s,
        "cpu_s": METRICS["cpu_s"].of_test(profile),
        "cpu_python_s": profile.cpu_python_s,
        "cpu_native_s": profile.cpu_native_s,
        "cpu_system_s": profile.cpu_system_s,
    }
    for name in METRIC_COLUMNS:
        metrics[name] = METRICS[name].of_test(profile)
    lines = []
    for key in sorted(profile.lines):
        stats = profile.lines[key]
        values = tuple(_number(METRICS[m].of_line(stats)) for m in LINE_METRICS)
        lines.append(LineRecord(key.file, key.line, key.function, values))
    verdicts = [v.to_dict() for v in profile.verdicts]
    # as the JSON profile writes them (6 decimals)
    machine_s = _number(profile.extra.get(extra_keys.MACHINE_S))
    return TestRecord(
        profile.nodeid, profile.outcome, metrics, rounded(verdicts), tuple(lines), machine_s
    )


def run_record(
    session: SessionProfile,
    rootdir: str,
    options: dict[str, Any],
    started_at: float | None = None,
    code_map: str | None = None,
) -> RunRecord:
    commit, branch, dirty = git_state(rootdir)
    info = machine_info()
    return RunRecord(
        run_uuid=uuid.uuid4().hex,
        started_at=time.time() if started_at is None else started_at,
        commit=commit,
        branch=branch,
        dirty=dirty,
        machine=fingerprint(info),
        machine_info=info,
        options=options,
        tests=tuple(test_record(p) for p in session.tests.values()),
        notes=tuple(session.notes),
        code_map=code_map,
    )


# -- packing -------------------------------------------------------------------------------------
def pack_lines(rows: list[tuple[int, tuple[float | None, ...]]]) -> bytes:
    """(line key id, figures) rows as one blob: 20 bytes a line instead of a row each (a
    2,000-test suite of 20 lines a test would add 40,000 rows a run)."""
    nan = math.nan
    return b"".join(
        _LINE_ROW.pack(key, *(nan if v is None else v for v in values)) for key, values in rows
    )


def unpack_lines(blob: bytes) -> list[tuple[int, tuple[float | None, ...]]]:
    """The rows of pack_lines, each figure to float32's 7 significant digits."""
    if len(blob) % _LINE_ROW.size:
        raise ValueError(f"line blob of {len(blob)} bytes is not a whole number of rows")
    return [
        (row[0], tuple(None if math.isnan(v) else float(f"{v:.7g}") for v in row[1:]))
        for row in _LINE_ROW.iter_unpack(blob)
    ]
