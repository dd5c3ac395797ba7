"""The history store's interface, shared by both backends: record a run in one transaction,
read runs and per-test series back. `open_store(url)` picks the backend from the URL.

The SQL lives here once; a backend (sqlite_backend, postgres_backend) supplies a connection,
its transactions and its column types. Readers get plain data (RunInfo, Point), never rows.
"""

from __future__ import annotations

import json
import zlib
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from . import schema
from .run_records import LINE_METRICS, TEST_METRICS, RunRecord, pack_lines, unpack_lines


class HistoryError(Exception):
    """A history store that cannot be used; str() names the store and what is wrong."""


def describe(url: str) -> str:
    """The URL without its password, for messages and reports."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()


@dataclass(frozen=True)
class RunInfo:
    id: int
    run_uuid: str
    started_at: float
    commit: str | None
    branch: str | None
    dirty: bool | None
    machine: str
    options_key: str
    test_count: int


@dataclass(frozen=True)
class Point:
    """One test's figures in one run."""

    run: RunInfo
    outcome: str
    gates: str
    metrics: dict[str, float | None]


_RUN_COLUMNS = (
    "id, run_uuid, started_at, commit_sha, branch, dirty, machine, options_key, test_count"
)
_FIGURES = ", ".join("r." + m for m in TEST_METRICS)


def _run_info(row: Sequence[Any]) -> RunInfo:
    dirty = None if row[5] is None else bool(row[5])
    return RunInfo(row[0], row[1], row[2], row[3], row[4], dirty, row[6], row[7], row[8])


class HistoryStore(ABC):
    """One history database. Subclasses implement the connection-level primitives."""

    # PostgreSQL: a team's database may hold other applications' tables beside ours; an SQLite
    # file with tables of its own is another application's file, never to be written into.
    shares_database = False
    blob_type = "BLOB"
    real_type = "DOUBLE PRECISION"
    id_type = "INTEGER PRIMARY KEY"

    def __init__(self, url: str) -> None:
        self.url = url

    # -- backend primitives ----------------------------------------------------------------------
    @abstractmethod
    def _execute(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Run one statement with `?` placeholders; the rows it returns (none for writes)."""

    @abstractmethod
    def _executemany(self, sql: str, rows: list[tuple[Any, ...]]) -> None: ...

    @abstractmethod
    @contextmanager
    def _transaction(self, exclusive: bool = False) -> Iterator[None]:
        """All or nothing; `exclusive` also keeps other writers out (schema changes)."""

    @abstractmethod
    def _tables(self) -> set[str]: ...

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> HistoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- schema ----------------------------------------------------------------------------------
    def _version(self) -> int:
        tables = self._tables()
        if "scalene_meta" not in tables:
            if any(t.startswith("scalene_") for t in tables):
                raise HistoryError(
                    f"{self.url}: has scalene_ tables but no scalene_meta: not a pytest-scalene "
                    "history (or a damaged one)"
                )
            if tables and not self.shares_database:
                shown = ", ".join(sorted(tables)[:5])
                raise HistoryError(
                    f"{self.url}: a database of another application (tables: {shown}), not a "
                    "pytest-scalene history; point --profile-history at a new file"
                )
            return 0
        meta = dict(self._execute("SELECT key, value FROM scalene_meta"))
        if meta.get("kind") != schema.KIND:
            raise HistoryError(
                f"{self.url}: not a pytest-scalene history (its scalene_meta says kind "
                f"{meta.get('kind')!r})"
            )
        try:
            return int(meta["schema_version"])
        except (KeyError, ValueError):
            raise HistoryError(f"{self.url}: history without a valid schema version") from None

    def ensure_schema(self) -> None:
        """Create the tables, or bring an older database up to SCHEMA_VERSION."""
        if self._version() == schema.SCHEMA_VERSION:
            return
        with self._transaction(exclusive=True):
            version = self._version()  # again, under the lock: another writer may have done it
            if version > schema.SCHEMA_VERSION:
                raise HistoryError(
                    f"{self.url}: written by a newer pytest-scalene (history schema {version}; "
                    f"this version reads up to {schema.SCHEMA_VERSION}): upgrade pytest-scalene"
                )
            types = {"id": self.id_type, "blob": self.blob_type, "real": self.real_type}
            for step in range(version, schema.SCHEMA_VERSION):
                statements, fill = schema.MIGRATIONS[step]
                for sql in statements:
                    self._execute(sql.format(**types))
                if fill is not None:
                    fill(self._execute)
            self._execute("DELETE FROM scalene_meta")
            self._executemany(
                "INSERT INTO scalene_meta (key, value) VALUES (?, ?)",
                [("kind", schema.KIND), ("schema_version", str(schema.SCHEMA_VERSION))],
            )

    def schema_version(self) -> int:
        return self._version()

    # -- writing ---------------------------------------------------------------------------------
    def _intern(self, table: str, columns: tuple[str, ...], keys: set[tuple[Any, ...]]):
        """{key: id} for `keys`, inserting the missing ones (sorted, so that two writers lock
        rows in the same order and cannot deadlock)."""
        names = ", ".join(columns)
        ids: dict[tuple[Any, ...], int] = {}
        if not keys:
            return ids

        def lookup() -> None:
            for row in self._execute(f"SELECT id, {names} FROM {table}"):
                key = tuple(row[1:])
                if key in keys:
                    ids[key] = row[0]

        lookup()
        missing = sorted(keys - ids.keys())
        if missing:
            marks = ", ".join("?" for _ in columns)
            self._executemany(
                f"INSERT INTO {table} ({names}) VALUES ({marks}) ON CONFLICT DO NOTHING", missing
            )
            lookup()
        return ids

    def record(self, run: RunRecord) -> int:
        """Write `run` in one transaction; its id. Nothing of it is stored if this fails."""
        self.ensure_schema()
        with self._transaction():
            test_ids = self._intern(
                "scalene_test_names", ("nodeid",), {(t.nodeid,) for t in run.tests}
            )
            line_keys = {(ln.file, ln.line, ln.function) for t in run.tests for ln in t.lines}
            line_ids = self._intern("scalene_line_keys", ("file", "line", "function"), line_keys)
            (run_id,) = self._execute(
                "INSERT INTO scalene_runs (run_uuid, started_at, commit_sha, branch, dirty, "
                "machine, machine_info, options, options_key, notes, test_count) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (
                    run.run_uuid,
                    run.started_at,
                    run.commit,
                    run.branch,
                    None if run.dirty is None else int(run.dirty),
                    run.machine,
                    json.dumps(run.machine_info, sort_keys=True),
                    json.dumps(run.options, sort_keys=True),
                    schema.options_key(run.options),
                    json.dumps(list(run.notes)),
                    len(run.tests),
                ),
            )[0]
            marks = ", ".join("?" for _ in range(len(TEST_METRICS) + 7))
            rows = []
            for test in run.tests:
                lines = [
                    (line_ids[(ln.file, ln.line, ln.function)], ln.metrics) for ln in test.lines
                ]
                rows.append(
                    (
                        run_id,
                        test_ids[(test.nodeid,)],
                        test.outcome,
                        test.gates,
                        *(test.metrics.get(m) for m in TEST_METRICS),
                        json.dumps(test.verdicts, separators=(",", ":")),
                        self._blob(pack_lines(lines)),
                        test.machine_s,
                    )
                )
            self._executemany(
                f"INSERT INTO scalene_results (run_id, test_id, outcome, gates, "
                f"{', '.join(TEST_METRICS)}, verdicts, lines, machine_s) VALUES ({marks})",
                rows,
            )
            if run.code_map is not None:
                self._execute(
                    "INSERT INTO scalene_code_maps (run_id, code_map) VALUES (?, ?)",
                    (run_id, self._blob(zlib.compress(run.code_map.encode(), 6))),
                )
        return run_id

    def _blob(self, data: bytes) -> Any:
        return data

    # -- reading ---------------------------------------------------------------------------------
    def latest_code_map(self) -> str | None:
        """The newest run's code map (JSON), None when no run stored one."""
        if self._version() < 3:
            return None
        rows = self._execute("SELECT code_map FROM scalene_code_maps ORDER BY run_id DESC LIMIT 1")
        return zlib.decompress(bytes(rows[0][0])).decode() if rows else None

    def runs(self, last: int | None = None, machine: str | None = None) -> list[RunInfo]:
        """The runs, oldest first: the `last` most recent (on `machine` when given)."""
        if self._version() == 0:
            return []
        where, params = ("WHERE machine = ?", (machine,)) if machine else ("", ())
        limit = f"LIMIT {int(last)}" if last else ""
        rows = self._execute(
            f"SELECT {_RUN_COLUMNS} FROM scalene_runs {where} ORDER BY id DESC {limit}", params
        )
        return [_run_info(r) for r in reversed(rows)]

    def series(self, runs: list[RunInfo]) -> dict[str, list[Point]]:
        """{nodeid: its Points in `runs`, oldest first}."""
        if not runs:
            return {}
        by_id = {r.id: r for r in runs}
        low, high = min(by_id), max(by_id)
        rows = self._execute(
            f"SELECT n.nodeid, r.run_id, r.outcome, r.gates, {_FIGURES} "
            "FROM scalene_results r JOIN scalene_test_names n ON n.id = r.test_id "
            "WHERE r.run_id BETWEEN ? AND ? ORDER BY n.nodeid, r.run_id",
            (low, high),
        )
        out: dict[str, list[Point]] = {}
        for row in rows:
            run = by_id.get(row[1])
            if run is not None:
                metrics = dict(zip(TEST_METRICS, row[4:], strict=True))
                out.setdefault(row[0], []).append(Point(run, row[2], row[3], metrics))
        return out

    def line_series(
        self, nodeid: str, runs: list[RunInfo]
    ) -> dict[tuple[str, int, str], list[tuple[int, dict[str, float | None]]]]:
        """{(file, line, function): [(run id, figures), ...]} for one test over `runs`."""
        if not runs:
            return {}
        ids = {r.id for r in runs}
        rows = self._execute(
            "SELECT r.run_id, r.lines FROM scalene_results r "
            "JOIN scalene_test_names n ON n.id = r.test_id "
            "WHERE n.nodeid = ? AND r.run_id BETWEEN ? AND ? ORDER BY r.run_id",
            (nodeid, min(ids), max(ids)),
        )
        keys = {
            row[0]: tuple(row[1:])
            for row in self._execute("SELECT id, file, line, function FROM scalene_line_keys")
        }
        out: dict[tuple[str, int, str], list[tuple[int, dict[str, float | None]]]] = {}
        for run_id, blob in rows:
            if run_id not in ids:
                continue
            for key_id, values in unpack_lines(bytes(blob)):
                figures = dict(zip(LINE_METRICS, values, strict=True))
                out.setdefault(keys[key_id], []).append((run_id, figures))
        return out

    def recent(self, machine: str, options_key: str, last: int) -> dict[str, list[dict[str, Any]]]:
        """{nodeid: figures of its passed runs} over the `last` runs on this machine with these
        options, oldest first: what history verdicts judge against; with "machine_s", the
        machine's speed beside the test, where it was timed (schema 4)."""
        version = self._version()
        if version == 0:
            return {}
        columns = (*TEST_METRICS, *(("machine_s",) if version >= 4 else ()))
        run_ids = [
            row[0]
            for row in self._execute(
                "SELECT id FROM scalene_runs WHERE machine = ? AND options_key = ? "
                f"ORDER BY id DESC LIMIT {int(last)}",
                (machine, options_key),
            )
        ]
        if not run_ids:
            return {}
        marks = ", ".join("?" for _ in run_ids)
        rows = self._execute(
            f"SELECT n.nodeid, {', '.join('r.' + c for c in columns)} "
            "FROM scalene_results r JOIN scalene_test_names n ON n.id = r.test_id "
            f"WHERE r.run_id IN ({marks}) AND r.outcome = 'passed' ORDER BY r.run_id",
            tuple(run_ids),
        )
        out: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            out.setdefault(row[0], []).append(dict(zip(columns, row[1:], strict=True)))
        return out

    def counts(self) -> dict[str, int]:
        """Rows per table (tests of the store use it to find leftovers)."""
        if self._version() == 0:
            return {}
        tables = ("scalene_runs", "scalene_results", "scalene_test_names", "scalene_line_keys")
        return {t: self._execute(f"SELECT COUNT(*) FROM {t}")[0][0] for t in tables}
