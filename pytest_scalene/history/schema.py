"""The history store's tables, its schema version and the migrations between versions.

Both backends run the same statements; `{id}`, `{blob}` and `{real}` stand for the column types
that differ. Tables carry a `scalene_` prefix so that a team's PostgreSQL database can hold them
beside other applications' tables. A migration is a function of the open transaction: the store
runs the missing ones, in order, under a lock, when it opens a database of an older version.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

KIND = "pytest-scalene history"
SCHEMA_VERSION = 4

# Version 1: runs, interned test names and line keys, one result row per test per run.
_V1 = (
    "CREATE TABLE scalene_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE scalene_runs (
        id {id}, run_uuid TEXT NOT NULL UNIQUE, started_at {real} NOT NULL,
        commit_sha TEXT, branch TEXT, dirty INTEGER, machine TEXT NOT NULL,
        machine_info TEXT NOT NULL, options TEXT NOT NULL, notes TEXT NOT NULL,
        test_count INTEGER NOT NULL)""",
    "CREATE TABLE scalene_test_names (id {id}, nodeid TEXT NOT NULL UNIQUE)",
    """CREATE TABLE scalene_line_keys (
        id {id}, file TEXT NOT NULL, line INTEGER NOT NULL, function TEXT NOT NULL,
        UNIQUE (file, line, function))""",
    """CREATE TABLE scalene_results (
        run_id BIGINT NOT NULL REFERENCES scalene_runs (id) ON DELETE CASCADE,
        test_id BIGINT NOT NULL REFERENCES scalene_test_names (id),
        outcome TEXT NOT NULL, gates TEXT NOT NULL,
        elapsed_s {real}, cpu_s {real}, cpu_python_s {real}, cpu_native_s {real},
        cpu_system_s {real}, peak_mb {real}, alloc_mb {real}, copy_mb {real}, copy_mb_s {real},
        gpu_peak_mb {real}, leaks {real},
        verdicts TEXT NOT NULL, lines {blob} NOT NULL,
        PRIMARY KEY (run_id, test_id))""",
)

# Version 2: runs compare only when the options that change figures are equal, so each run
# stores a key of them, filled in for the runs recorded by version 1; and an index for the
# "last N runs of this test" queries of trends and history verdicts.
_V2 = (
    "ALTER TABLE scalene_runs ADD COLUMN options_key TEXT NOT NULL DEFAULT ''",
    "CREATE INDEX scalene_results_by_test ON scalene_results (test_id, run_id)",
    "CREATE INDEX scalene_runs_by_machine ON scalene_runs (machine, options_key, id)",
)


# Version 3: each run's code map (selection/code_map.py: which code each test ran), zlib'd JSON,
# for a gate run that has no map file beside its baselines.
_V3 = (
    """CREATE TABLE scalene_code_maps (
        run_id BIGINT PRIMARY KEY REFERENCES scalene_runs (id) ON DELETE CASCADE,
        code_map {blob} NOT NULL)""",
)


# Version 4: the machine's speed beside each test's timed runs (gates/machine_speed.py), so that
# a CPU growth this machine's slowdown explains is not judged a regression against history.
_V4 = ("ALTER TABLE scalene_results ADD COLUMN machine_s {real}",)


def options_key(options: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(options, sort_keys=True).encode()).hexdigest()[:12]


Execute = Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]]


def _fill_options_keys(execute: Execute) -> None:
    for run_id, options in execute("SELECT id, options FROM scalene_runs", ()):
        key = options_key(json.loads(options))
        execute("UPDATE scalene_runs SET options_key = ? WHERE id = ?", (key, run_id))


# MIGRATIONS[v] brings a database from version v to v + 1 (version 0: empty).
MIGRATIONS: dict[int, tuple[tuple[str, ...], Callable[[Execute], None] | None]] = {
    0: (_V1, None),
    1: (_V2, _fill_options_keys),
    2: (_V3, None),
    3: (_V4, None),
}
