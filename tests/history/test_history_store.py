"""The history store on both backends (SQLite, and a real PostgreSQL server the tests start):
write and read back, migrate from schema 1, 8 concurrent writers losing nothing, an interrupted
run leaving no trace, and clear errors for corrupt or foreign databases."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3

import pytest

from pytest_scalene.history import schema
from pytest_scalene.history.connect import open_store
from pytest_scalene.history.store import HistoryError, HistoryStore

from .history_support import make_run


def test_a_run_reads_back_as_written(store_url):
    with open_store(store_url) as store:
        first = store.record(make_run(1.0, commit="aaa"))
        second = store.record(make_run(2.0, commit="bbb", machine="machine-b"))
        assert store.schema_version() == schema.SCHEMA_VERSION
        runs = store.runs()
        assert [r.id for r in runs] == [first, second]
        assert [r.commit for r in runs] == ["aaa", "bbb"] and runs[0].test_count == 3
        assert [r.id for r in store.runs(machine="machine-b")] == [second]
        assert [r.id for r in store.runs(last=1)] == [second]
        series = store.series(runs)
        assert sorted(series) == [f"tests/test_m.py::test_{t}" for t in range(3)]
        points = series["tests/test_m.py::test_2"]
        assert [p.metrics["cpu_s"] for p in points] == [3.0, 4.0]
        assert points[0].metrics["peak_mb"] == 20.0 and points[0].metrics["alloc_mb"] is None
        assert points[0].gates == "passed" and points[0].run.commit == "aaa"
        lines = store.line_series("tests/test_m.py::test_1", runs)
        assert sorted(lines)[0] == ("tests/test_m.py", 10, "test_1")
        figures = lines[("tests/test_m.py", 13, "test_1")]
        assert [(run, f["cpu_s"], f["peak_mb"], f["alloc_mb"]) for run, f in figures] == [
            (first, 4.0, None, 3.0),
            (second, 5.0, None, 3.0),
        ]
        recent = store.recent("machine-a", schema.options_key({"interval_s": 0.01}), 10)
        assert [p["cpu_s"] for p in recent["tests/test_m.py::test_0"]] == [1.0]
        assert [p["machine_s"] for p in recent["tests/test_m.py::test_0"]] == [0.001]
        assert store.recent("machine-a", "other-options", 10) == {}


def _v1_database(url: str) -> None:
    """A history as schema version 1 wrote it, with one run."""
    store = open_store(url)
    types = {"id": store.id_type, "blob": store.blob_type, "real": store.real_type}
    with store._transaction(exclusive=True):
        for sql in schema.MIGRATIONS[0][0]:
            store._execute(sql.format(**types))
        store._executemany(
            "INSERT INTO scalene_meta (key, value) VALUES (?, ?)",
            [("kind", schema.KIND), ("schema_version", "1")],
        )
        store._execute(
            "INSERT INTO scalene_runs (run_uuid, started_at, machine, machine_info, options, "
            "notes, test_count) VALUES ('old', 1.0, 'm', '{}', '{\"clock\": \"cpu\"}', '[]', 0)"
        )
    store.close()


def test_a_version_1_history_is_migrated_keeping_its_runs(store_url):
    _v1_database(store_url)
    with open_store(store_url) as store:
        assert store.schema_version() == 1
        store.record(make_run(1.0))
        assert store.schema_version() == schema.SCHEMA_VERSION
        old, new = store.runs()
        assert old.run_uuid == "old" and old.options_key == schema.options_key({"clock": "cpu"})
        assert new.options_key == schema.options_key({"interval_s": 0.01})


def test_a_history_from_a_newer_version_is_refused(store_url):
    with open_store(store_url) as store:
        store.record(make_run(1.0))
        store._execute("UPDATE scalene_meta SET value = '99' WHERE key = 'schema_version'")
        with pytest.raises(HistoryError, match="newer pytest-scalene .*schema 99"):
            store.record(make_run(2.0))


def _writer(url: str, writer: int, runs: int) -> None:
    with open_store(url) as store:
        for k in range(runs):
            store.record(make_run(writer * 100 + k, tests=20, lines=10, commit=f"w{writer}"))


def test_eight_concurrent_writers_lose_nothing(store_url):
    ctx = multiprocessing.get_context("spawn")
    writers = [ctx.Process(target=_writer, args=(store_url, w, 4)) for w in range(8)]
    for p in writers:
        p.start()
    for p in writers:
        p.join(240)
    assert [p.exitcode for p in writers] == [0] * 8
    with open_store(store_url) as store:
        counts = store.counts()
        assert counts["scalene_runs"] == 32 and counts["scalene_results"] == 32 * 20
        assert counts["scalene_test_names"] == 20 and counts["scalene_line_keys"] == 20 * 10
        runs = store.runs()
        series = store.series(runs)
        for run in runs:  # each run's figures are its own, none mixed with another's
            tag = int(series["tests/test_m.py::test_0"][runs.index(run)].metrics["cpu_s"])
            assert run.commit == f"w{tag // 100}"
            lines = store.line_series("tests/test_m.py::test_7", [run])
            assert {f["cpu_s"] for (_, ln, _), [(_, f)] in lines.items() if ln == 12} == {tag + 2}


def _interrupted_writer(url: str) -> None:
    """Record a run and die (os._exit: no cleanup at all) after the run and its tests' names
    are written, before the results."""
    store = open_store(url)
    real = store._executemany

    def die_at_results(sql, rows):
        if "scalene_results" in sql:
            os._exit(3)
        real(sql, rows)

    store._executemany = die_at_results
    store.record(make_run(5.0, tests=10))


def test_an_interrupted_run_leaves_no_trace(store_url):
    with open_store(store_url) as store:
        store.record(make_run(1.0))
        before = store.counts()
    child = multiprocessing.get_context("spawn").Process(
        target=_interrupted_writer, args=(store_url,)
    )
    child.start()
    child.join(60)
    assert child.exitcode == 3
    with open_store(store_url) as store:
        assert store.counts() == before  # no run row, no new test names
        store.record(make_run(2.0))  # and the lock is free again
        assert store.counts()["scalene_runs"] == 2


def test_an_exception_while_recording_rolls_the_run_back(store_url, monkeypatch):
    with open_store(store_url) as store:
        store.record(make_run(1.0))
        before = store.counts()
        monkeypatch.setattr("pytest_scalene.history.store.pack_lines", _broken)
        with pytest.raises(RuntimeError, match="broken"):
            store.record(make_run(2.0, tests=5))
        assert store.counts() == before


def _broken(rows):
    raise RuntimeError("broken")


def test_a_foreign_postgresql_history_is_refused(store_url):
    with open_store(store_url) as store:
        store.record(make_run(1.0))
        store._execute("UPDATE scalene_meta SET value = 'something else' WHERE key = 'kind'")
    with (
        open_store(store_url) as store,
        pytest.raises(HistoryError, match="not a pytest-scalene history .*'something else'"),
    ):
        store.record(make_run(2.0))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"this is not a database at all" * 100, "not an SQLite database or is damaged"),
        (b"", None),  # an empty file is a new history
    ],
)
def test_a_corrupt_sqlite_file_is_a_clear_error(tmp_path, content, message):
    path = tmp_path / "history.db"
    path.write_bytes(content)
    if message is None:
        with open_store(str(path)) as store:
            store.record(make_run(1.0))
        return
    with pytest.raises(HistoryError, match=message) as info:
        open_store(str(path)).record(make_run(1.0))
    assert str(path) in str(info.value)
    assert path.read_bytes() == content  # left as it was


def test_a_damaged_sqlite_history_is_a_clear_error(tmp_path):
    path = tmp_path / "history.db"
    with open_store(str(path)) as store:
        for k in range(30):
            store.record(make_run(k, tests=20, lines=10))
    data = bytearray(path.read_bytes())
    data[4096:] = b"\xff" * (len(data) - 4096)  # every page after the first overwritten
    path.write_bytes(bytes(data))
    with (
        pytest.raises(HistoryError, match="not an SQLite database or is damaged"),
        open_store(str(path)) as store,
    ):
        store.series(store.runs())


def test_another_applications_sqlite_file_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (name TEXT)")
    with pytest.raises(HistoryError, match=r"another application \(tables: users\)"):
        open_store(str(path)).record(make_run(1.0))
    with sqlite3.connect(path) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert tables == {"users"}


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("", "expected a path or a URL"),
        ("mysql://db/history", "unknown history URL scheme 'mysql'"),
        ("sqlite://host/history.db", "an SQLite URL has no host"),
    ],
)
def test_bad_urls_are_clear_errors(url, message):
    with pytest.raises(HistoryError, match=message):
        open_store(url)


def test_sqlite_urls_and_paths_name_the_same_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with open_store("sqlite:///rel.db") as store:
        store.record(make_run(1.0))
    with open_store("rel.db") as store:
        assert len(store.runs()) == 1
    with open_store(f"sqlite:///{tmp_path}/abs.db") as store:
        store.record(make_run(1.0))
    assert (tmp_path / "abs.db").exists()


def test_a_missing_history_is_an_error_for_readers(tmp_path):
    with pytest.raises(HistoryError, match="no such history file"):
        open_store(str(tmp_path / "none.db"), create=False)
    assert not (tmp_path / "none.db").exists()


def test_postgresql_passwords_are_not_shown(postgres):
    url = f"postgresql://postgres:s3cret@127.0.0.1:{postgres.port}/no_such_database"
    with pytest.raises(HistoryError) as info:
        open_store(url)
    assert "s3cret" not in str(info.value) and ":***@" in str(info.value)


def test_both_backends_implement_the_interface():
    from pytest_scalene.history.postgres_backend import PostgresStore
    from pytest_scalene.history.sqlite_backend import SqliteStore

    assert issubclass(SqliteStore, HistoryStore) and issubclass(PostgresStore, HistoryStore)
    assert not SqliteStore.__abstractmethods__ and not PostgresStore.__abstractmethods__


def test_a_runs_code_map_is_stored_and_the_newest_is_read_back(store_url):
    from dataclasses import replace

    with open_store(store_url) as store:
        assert store.latest_code_map() is None
        store.record(replace(make_run(1.0), code_map='{"map": 1}'))
        store.record(make_run(2.0))  # a run without a map leaves the newest map as it was
        store.record(replace(make_run(3.0), code_map='{"map": 3}'))
        assert store.latest_code_map() == '{"map": 3}'
