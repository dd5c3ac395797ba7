"""The default history backend: one SQLite file, nothing to install.

Concurrent writers (parallel CI jobs on one runner, several pytest sessions) are serialised by
SQLite's write lock: each run is one BEGIN IMMEDIATE transaction, and a writer waits up to
BUSY_TIMEOUT_S for the lock. WAL journaling lets readers (the trends command) read while a run is
being written, and an interrupted writer leaves only a journal that SQLite rolls back.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .store import HistoryError, HistoryStore

BUSY_TIMEOUT_S = 120.0


class SqliteStore(HistoryStore):
    def __init__(self, url: str, path: str) -> None:
        super().__init__(url)
        self.path = Path(path)
        if self.path.is_dir():
            raise HistoryError(f"{url}: is a directory; give the history file's path")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(
                os.fspath(self.path), timeout=BUSY_TIMEOUT_S, isolation_level=None
            )
        except (OSError, sqlite3.Error) as exc:
            raise HistoryError(f"{url}: cannot open the SQLite file: {exc}") from None
        try:
            mode = self.conn.execute("PRAGMA journal_mode=WAL").fetchone()
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            raise HistoryError(self._explain(exc)) from None
        self.journal_mode = mode[0] if mode else None

    def _explain(self, exc: sqlite3.Error) -> str:
        text = str(exc)
        if "not a database" in text or "malformed" in text:
            return (
                f"{self.url}: not a usable pytest-scalene history: the file is not an SQLite "
                f"database or is damaged ({text}); move it away to start a new history"
            )
        return f"{self.url}: SQLite error: {text}"

    def _execute(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        try:
            return self.conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise HistoryError(self._explain(exc)) from None

    def _executemany(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        try:
            self.conn.executemany(sql, rows)
        except sqlite3.Error as exc:
            raise HistoryError(self._explain(exc)) from None

    @contextmanager
    def _transaction(self, exclusive: bool = False) -> Iterator[None]:
        # IMMEDIATE takes the write lock now: a deferred transaction that upgrades later can
        # fail at once with "database is locked" instead of waiting.
        self._execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.conn.rollback()
            raise
        self._execute("COMMIT")

    def _tables(self) -> set[str]:
        rows = self._execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        return {r[0] for r in rows if not r[0].startswith("sqlite_")}

    def close(self) -> None:
        self.conn.close()
