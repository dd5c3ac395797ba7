"""The history tests' backends: a fresh SQLite file, or a fresh database on a PostgreSQL server
started for the session (tests/history/pg_server.py; skipped, saying why, where none is
installed)."""

from __future__ import annotations

import itertools
import uuid

import pytest

from . import pg_server

BACKENDS = ("sqlite", "postgresql")
_names = itertools.count()


@pytest.fixture(scope="session")
def postgres():
    reason = pg_server.unavailable_reason()
    if reason:
        pytest.skip(reason)
    server = pg_server.PostgresServer(pg_server.find_bin())
    try:
        server.start()
    except Exception as exc:  # a broken install: say what failed
        server.stop()
        pytest.fail(f"PostgreSQL is installed but did not start: {exc!r}")
    yield server
    server.stop()


@pytest.fixture(params=BACKENDS)
def store_url(request, tmp_path):
    """A URL of an empty history store of each backend."""
    if request.param == "sqlite":
        return str(tmp_path / "history.db")
    server = request.getfixturevalue("postgres")
    return server.create_database(f"history_{next(_names)}_{uuid.uuid4().hex[:6]}")
