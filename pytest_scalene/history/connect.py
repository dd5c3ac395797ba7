"""Opening a history store: the URL picks the backend, a plain path or sqlite:///PATH for SQLite,
postgresql://... for PostgreSQL."""

from __future__ import annotations

import os
from urllib.parse import unquote, urlsplit

from .store import HistoryError, HistoryStore, describe

POSTGRES_SCHEMES = ("postgresql", "postgres")


def sqlite_path(url: str) -> str | None:
    """The file of an SQLite URL, or None when `url` is not one."""
    if "://" not in url:
        return url  # a plain path
    parts = urlsplit(url)
    if parts.scheme != "sqlite":
        return None
    if parts.netloc:
        raise HistoryError(
            f"{url}: an SQLite URL has no host: write sqlite:///relative/path or "
            "sqlite:////absolute/path"
        )
    return unquote(parts.path[1:] if parts.path.startswith("/") else parts.path)


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
