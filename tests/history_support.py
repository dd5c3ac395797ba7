"""Shared by the history tests: the two backends as a fixture (a fresh SQLite file, or a fresh
database on a PostgreSQL server started for the session) and synthetic runs."""

from __future__ import annotations

import itertools
import uuid

import pg_server
import pytest

from pytest_scalene.history.record import LineRecord, RunRecord, TestRecord

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


def make_run(
    tag: float,
    tests: int = 3,
    lines: int = 4,
    commit: str = "c0ffee",
    machine: str = "machine-a",
    options: dict | None = None,
) -> RunRecord:
    """A run whose every figure derives from `tag`, so that a reader can check each one."""
    records = tuple(
        TestRecord(
            nodeid=f"tests/test_m.py::test_{t}",
            outcome="passed",
            metrics={"cpu_s": tag + t, "elapsed_s": tag + t + 0.5, "peak_mb": 10.0 * t},
            verdicts=[{"kind": "budget", "metric": "cpu_s", "passed": True}],
            lines=tuple(
                LineRecord("tests/test_m.py", 10 + k, f"test_{t}", (tag + k, None, 1.0 * k, 0.0))
                for k in range(lines)
            ),
        )
        for t in range(tests)
    )
    return RunRecord(
        run_uuid=uuid.uuid4().hex,
        started_at=1_700_000_000.0 + tag,
        commit=commit,
        branch="main",
        dirty=False,
        machine=machine,
        machine_info={"cpu": "test"},
        options=options or {"interval_s": 0.01},
        tests=records,
    )
