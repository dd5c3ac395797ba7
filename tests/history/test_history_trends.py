"""Trends and change points: a series recorded on this machine (tests/history/history_noise.json:
the CPU time of two tests over consecutive real profiled sessions) with a 1.3x step injected at a
known commit is found at that commit, by the library call, through the store and in the command's
terminal and HTML output; the same noise without a step shows no change point over 200 runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("ruptures", reason="change points need ruptures (the [history] extra)")

from pytest_scalene.cli import main  # noqa: E402
from pytest_scalene.history.changepoints import detect  # noqa: E402
from pytest_scalene.history.connect import open_store  # noqa: E402
from pytest_scalene.history.run_records import RunRecord, TestRecord  # noqa: E402
from pytest_scalene.history.trends import trends  # noqa: E402

from .history_support import make_run  # noqa: E402

NOISE = json.loads((Path(__file__).parent / "history_noise.json").read_text())["series"]
STEP = 1.3
UNCHANGED_RUNS = 200


def commit(i: int) -> str:
    return f"{i:04d}" + "ab" * 18


def stepped(series: list[float], start: int, length: int, at: int) -> list[float]:
    return [v * (STEP if i >= at else 1.0) for i, v in enumerate(series[start : start + length])]


# (test, first recorded run used, runs, the step's index)
STEPS = [
    ("test_loop", 0, 100, 61),
    ("test_loop", 100, 100, 33),
    ("test_alloc", 20, 100, 47),
    ("test_alloc", 150, 80, 52),
]


@pytest.mark.parametrize(("name", "start", "length", "at"), STEPS)
def test_an_injected_step_is_found_at_its_run(name, start, length, at):
    series = stepped(NOISE[name], start, length, at)
    (found,) = detect(series)
    assert found.index == at
    assert found.ratio == pytest.approx(STEP, rel=0.12)


@pytest.mark.parametrize("first", [True, False], ids=["first-200", "last-200"])
@pytest.mark.parametrize("name", sorted(NOISE))
def test_no_change_point_in_200_unchanged_runs(name, first):
    series = NOISE[name][:UNCHANGED_RUNS] if first else NOISE[name][-UNCHANGED_RUNS:]
    assert len(series) == UNCHANGED_RUNS
    assert detect(series) == []


def _record(url: str, values: dict[str, list[float]]) -> None:
    runs = len(next(iter(values.values())))
    with open_store(url) as store:
        for i in range(runs):
            tests = tuple(
                TestRecord(f"tests/test_w.py::{name}", "passed", {"cpu_s": series[i]}, [], ())
                for name, series in values.items()
            )
            store.record(
                RunRecord(f"r{i}", 1.7e9 + i, commit(i), "main", False, "m", {}, {}, tests)
            )


def test_the_step_names_the_first_commit_after_it_in_the_terminal_and_the_page(
    tmp_path, capsys, store_url
):
    url = store_url  # SQLite, and a PostgreSQL database
    _record(
        url,
        {
            "test_stepped": stepped(NOISE["test_loop"], 0, 100, 61),
            "test_steady": NOISE["test_alloc"][:100],
        },
    )
    with open_store(url) as store:
        found, note = trends(store, store.runs(), "cpu_s")
    assert note is None
    by_test = {t.nodeid.split("::")[1]: t for t in found}
    (change,) = by_test["test_stepped"].changes
    assert by_test["test_stepped"].commit_at(change.index) == commit(61)[:10]
    assert by_test["test_steady"].changes == []

    page = tmp_path / "h.html"
    assert main(["history", url, "--last", "100", "--html", str(page)]) == 0
    out = capsys.readouterr().out
    assert re.search(rf"▲ \+\d\d% from {commit(61)[:10]} \(run 62: ", out), out
    assert out.count("▲") == 1 and "▼" not in out
    text = page.read_text()
    assert "<script" not in text and "script-src" not in text  # nothing can run
    assert text.index("test_stepped") < text.index("test_steady")  # steps first
    assert f"{commit(61)[:10]} +" in text  # the change point's label on the chart
    assert text.count("<circle") == 200  # one point per run and test, each with its commit
    assert f"run 1 · {commit(0)[:10]} · main" in text


def test_line_trends_show_each_tests_costliest_lines(tmp_path, capsys):
    url = str(tmp_path / "h.db")
    with open_store(url) as store:
        for k in range(6):
            store.record(make_run(float(k), tests=1, lines=7))
    assert main(["history", url, "--lines"]) == 0
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if re.search(r"tests/test_m.py:\d", ln)]
    assert len(lines) == 5  # the 5 costliest of 7
    assert lines[0].rstrip().endswith("tests/test_m.py:16 test_0")  # cpu_s = tag + 6: highest


def test_history_of_a_missing_or_empty_store(tmp_path, capsys):
    assert main(["history", str(tmp_path / "none.db")]) == 2
    assert "no such history file" in capsys.readouterr().err
    assert not (tmp_path / "none.db").exists()
    with open_store(str(tmp_path / "empty.db")) as store:
        store.ensure_schema()
    assert main(["history", str(tmp_path / "empty.db")]) == 0
    assert "no run recorded yet" in capsys.readouterr().err
