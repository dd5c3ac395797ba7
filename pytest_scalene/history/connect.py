"""Opening a history store: the URL picks the backend (SQLite or PostgreSQL)."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from .store import HistoryError, HistoryStore
from .urls import POSTGRES_SCHEMES, describe, sqlite_path


def backend_for(url: str | None, create: bool = True) -> HistoryStore:
    if not url or not url.strip():
        raise HistoryError("--profile-history: expected a path or a URL, got an empty string")
    url = url.strip()
    path = sqlite_path(url)
    if path is not None:
        from .sqlite_backend import SqliteStore

        if not create and not os.path.exists(path):
            raise HistoryError(f"{url}: no such history file")
        return SqliteStore(url, path)
    scheme = urlsplit(url).scheme
    if scheme in POSTGRES_SCHEMES:
        from .postgres_backend import PostgresStore

        return PostgresStore(url)
    raise HistoryError(
        f"{describe(url)}: unknown history URL scheme {scheme!r}: use a path, sqlite:///PATH "
        "or postgresql://USER@HOST/DB"
    )


def open_store(url: str | None, create: bool = True) -> HistoryStore:
    """The store at `url`: a path or sqlite:///PATH (SQLite), or postgresql://... . Without
    `create`, a missing SQLite file is an error (readers must not create empty histories)."""
    return backend_for(url, create)
