"""The history store at scale: a synthetic history of TESTS tests x RUNS runs x LINES lines a
test, in SQLite and PostgreSQL; the store's size, the time to record one more run, and the time
to draw the history page (the last PAGE_RUNS runs of every test, change points included).
Writes its kept block of docs/benchmarks.md and docs/history_bench.json.

    .venv/bin/python benchmarks/history_bench.py                       # 2000 x 1000 x 20, SQLite
    .venv/bin/python benchmarks/history_bench.py --backend postgresql --runs 100

The store is filled with the rows record() writes (bulk_fill), and the one more run is timed
through record() itself, as pytest records. With --runs below the target,
the size is also extrapolated linearly to 1,000 runs (rows per run are the same in every run).
PostgreSQL runs on a throwaway server (tests/history/pg_server.py) with fsync off, as in the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "history"))

from pytest_scalene.history.connect import open_store  # noqa: E402
from pytest_scalene.history.history_html import render_page  # noqa: E402
from pytest_scalene.history.run_records import (  # noqa: E402
    TEST_METRICS,
    LineRecord,
    RunRecord,
    TestRecord,
)

SECTION = "history-store"  # its kept block in docs/benchmarks.md
TARGET_RUNS = 1000
RECORD_REPEATS = 5
PAGE_RUNS = 100


def synthetic_run(k: int, tests: int, lines: int, rng: random.Random) -> RunRecord:
    records = []
    for t in range(tests):
        cpu = 0.05 + 0.001 * (t % 97)
        records.append(
            TestRecord(
                f"tests/test_mod{t // 50}.py::test_case_{t}",
                "passed",
                {"elapsed_s": cpu * 1.1, "cpu_s": cpu * rng.uniform(0.9, 1.3), "peak_mb": 12.0},
                [{"kind": "budget", "metric": "cpu_s", "passed": True}],
                tuple(
                    LineRecord(
                        f"src/module{t // 50}.py",
                        10 + line,
                        f"function_{t}",
                        (cpu / lines * rng.uniform(0.8, 1.4), 1.5, 0.5, 0.0),
                    )
                    for line in range(lines)
                ),
            )
        )
    return RunRecord(
        uuid.uuid4().hex, 1.7e9 + k * 600, f"{k:040x}", "main", False, "bench-machine",
        {"cpu": "bench"}, {"interval_s": 0.01}, tuple(records),
    )  # fmt: skip


def store_size(store, url: str) -> int:
    if url.startswith("postgresql"):
        rows = store._execute(
            "SELECT SUM(pg_total_relation_size(quote_ident(table_name))) FROM "
            "information_schema.tables WHERE table_schema = current_schema()"
        )
        return int(rows[0][0])
    return sum(os.path.getsize(p) for p in (url, url + "-wal") if os.path.exists(p))


def bulk_fill(store, tests: int, runs: int, lines: int, rng: random.Random) -> None:
    """`runs` runs of the rows record() writes: the first run through record() (it interns the
    test names and line keys), the others as copies of its result rows with fresh figures, one
    transaction a run. Building 40,000 line records a run in Python would take the shared VM an
    hour for 1,000 runs; the rows, and so the store's size and indexes, are the same."""
    store.record(synthetic_run(0, tests, lines, rng))
    columns = ("test_id", "outcome", "gates", *TEST_METRICS, "verdicts", "lines")
    template = store._execute(
        f"SELECT {', '.join(columns)} FROM scalene_results WHERE run_id = "
        "(SELECT MIN(id) FROM scalene_runs)"
    )
    cpu = columns.index("cpu_s")
    marks = ", ".join("?" for _ in range(len(columns) + 1))
    for k in range(1, runs):
        with store._transaction():
            (run_id,) = store._execute(
                "INSERT INTO scalene_runs (run_uuid, started_at, commit_sha, branch, dirty, "
                "machine, machine_info, options, options_key, notes, test_count) "
                "SELECT ?, ?, ?, branch, dirty, machine, machine_info, options, options_key, "
                "notes, test_count FROM scalene_runs WHERE id = (SELECT MIN(id) FROM "
                "scalene_runs) RETURNING id",
                (uuid.uuid4().hex, 1.7e9 + k * 600, f"{k:040x}"),
            )[0]
            rows = []
            for row in template:
                row = list(row)
                row[cpu] = row[cpu] * rng.uniform(0.9, 1.3)
                rows.append((run_id, *row))
            store._executemany(
                f"INSERT INTO scalene_results (run_id, {', '.join(columns)}) VALUES ({marks})",
                rows,
            )
        if k % 100 == 99:
            print(f"  {k + 1} runs", flush=True)


def measure(url: str, tests: int, runs: int, lines: int) -> dict:
    rng = random.Random(7)
    started = time.perf_counter()
    with open_store(url) as store:
        bulk_fill(store, tests, runs, lines, rng)
        fill_s = time.perf_counter() - started
        if not url.startswith("postgresql"):
            store._execute("PRAGMA wal_checkpoint(TRUNCATE)")
        else:
            store._execute("VACUUM ANALYZE")
        size = store_size(store, url)
        record_s = []
        for k in range(RECORD_REPEATS):
            run = synthetic_run(runs + k, tests, lines, rng)
            t0 = time.perf_counter()
            store.record(run)
            record_s.append(time.perf_counter() - t0)
        page_s, page_bytes = [], 0
        for _ in range(3):
            t0 = time.perf_counter()
            recent = store.runs(last=PAGE_RUNS)
            page = render_page(store, recent, "cpu_s", "")
            page_s.append(time.perf_counter() - t0)
            page_bytes = len(page.encode())
    return {
        "tests": tests,
        "runs": runs,
        "lines": lines,
        "fill_s": round(fill_s, 1),
        "size_mb": round(size / 2**20, 1),
        "size_mb_at_1000_runs": round(size / 2**20 * TARGET_RUNS / runs, 1),
        "record_one_run_s": round(statistics.median(record_s), 3),
        "record_one_run_s_all": [round(s, 3) for s in record_s],
        "page_runs": PAGE_RUNS,
        "page_s": round(statistics.median(page_s), 2),
        "page_mb": round(page_bytes / 2**20, 1),
    }


def section(results: dict) -> str:
    """docs/benchmarks.md's "History store" section from history_bench.json."""
    rows = []
    for backend in ("sqlite", "postgresql"):
        r = results.get(backend)
        if r is None:
            rows.append(f"| {backend} | not measured | | | | |")
            continue
        scaled = "" if r["runs"] >= TARGET_RUNS else f" ({r['size_mb_at_1000_runs']:,} MB at 1,000)"
        rows.append(
            f"| {backend} | {r['tests']:,} x {r['runs']:,} x {r['lines']} | "
            f"{r['size_mb']:,} MB{scaled} | {r['fill_s']:,} s | {r['record_one_run_s']} s "
            f"({', '.join(map(str, r['record_one_run_s_all']))}) | {r['page_s']} s, "
            f"{r['page_mb']} MB |"
        )
    return "\n".join(
        [
            "## History store",
            "",
            "`benchmarks/history_bench.py`: a synthetic history of tests x runs x lines per test "
            "(the first run through the store's `record()`, the others as copies of its rows "
            "with fresh figures, one transaction a run: same tables, rows and indexes), then "
            "the time to record one more run (median of "
            f"{RECORD_REPEATS}, all shown) and to draw the history page of the last "
            f"{PAGE_RUNS} runs of every test, change points included (median of 3). "
            "PostgreSQL 15 runs on a throwaway local server with fsync off. Measured on the "
            "shared 2-core development VM while other agents worked (load 8-11): times are "
            "upper bounds; sizes are exact.",
            "",
            "| backend | tests x runs x lines | store size | filling it "
            "| one more run, through record() | history page |",
            "| --- | --- | --- | --- | --- | --- |",
            *rows,
            "",
            "Store size grows linearly with runs (every run adds the same rows), so a size "
            "measured over fewer runs is also shown scaled to 1,000. Recording one run costs "
            "one transaction of one row per test, whatever the history's length. The page "
            "draws one chart per test with a tooltip per point and runs change point detection "
            "on each series (about 1 ms a series).",
            "",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--tests", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=TARGET_RUNS)
    parser.add_argument("--lines", type=int, default=20)
    parser.add_argument("--out", default=str(ROOT / "docs" / "history_bench.json"))
    parser.add_argument(
        "--render", action="store_true", help="only write the docs section from --out's figures"
    )
    args = parser.parse_args()
    if args.render:
        write_section(json.loads(Path(args.out).read_text()))
        return
    with tempfile.TemporaryDirectory() as tmp:
        if args.backend == "sqlite":
            result = measure(os.path.join(tmp, "history.db"), args.tests, args.runs, args.lines)
        else:
            import pg_server

            server = pg_server.PostgresServer(pg_server.find_bin())
            server.start()
            try:
                url = server.create_database("bench")
                result = measure(url, args.tests, args.runs, args.lines)
            finally:
                server.stop()
    result["backend"] = args.backend
    out = Path(args.out)
    found = json.loads(out.read_text()) if out.exists() else {}
    found[args.backend] = result
    out.write_text(json.dumps(found, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    write_section(found)


def write_section(results: dict) -> None:
    """Replace (or append) this benchmark's kept block of docs/benchmarks.md (report.py leaves
    kept blocks in place)."""
    page = ROOT / "docs" / "benchmarks.md"
    begin, end = f"<!-- kept: {SECTION} -->", f"<!-- /kept: {SECTION} -->"
    block = f"{begin}\n{section(results).strip()}\n{end}\n"
    old = page.read_text()
    if begin in old and end in old:
        head, rest = old.split(begin, 1)
        page.write_text(head + block + rest.split(end, 1)[1].lstrip("\n"))
    else:
        page.write_text(old.rstrip("\n") + "\n\n" + block)


if __name__ == "__main__":
    main()
