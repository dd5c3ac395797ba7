"""CI shards in one report: the same suite run whole and split over 3 shards, the shards'
profiles merged by `pytest-scalene merge`, gives the same tests, outcomes, verdicts and counted
figures as the single run, and one JSON, HTML and Markdown report. Baselines saved by shards
merge into one directory, and shards saving into one directory at once lose no test."""

from __future__ import annotations

import json
import multiprocessing

import pytest
from shim_support import needs_shim

from pytest_scalene.cli import main
from pytest_scalene.gates import baseline_store
from pytest_scalene.gates.baseline_merge import BaselineMergeError, merge_dirs
from pytest_scalene.gates.baseline_store import LineEntry, TestEntry

SUITE = """
import pytest


def crunch(n):
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


@pytest.mark.perf_budget(cpu_s=60)
def test_cpu_ok():
    assert crunch(200_000) >= 0


@pytest.mark.perf_budget(peak_mb=5)
def test_memory_over_budget():
    held = [bytearray(1 << 20) for _ in range(40)]
    assert held


@pytest.mark.perf_budget(peak_mb=200, alloc_mb=200)
def test_memory_ok():
    held = [bytearray(1 << 20) for _ in range(60)]
    assert held


def test_fails():
    assert crunch(10) == -1


@pytest.mark.parametrize("n", [1, 2])
def test_param(n):
    held = bytearray(n * 25 << 20)
    assert crunch(50_000) >= 0 and held
"""
TESTS = [
    "test_suite.py::test_cpu_ok",
    "test_suite.py::test_memory_over_budget",
    "test_suite.py::test_memory_ok",
    "test_suite.py::test_fails",
    "test_suite.py::test_param[1]",
    "test_suite.py::test_param[2]",
]


def _verdicts(test: dict) -> list[tuple]:
    return [(v["kind"], v["metric"], v["passed"], v["limit"]) for v in test.get("verdicts", [])]


@needs_shim
@pytest.mark.slow
def test_three_shards_merged_match_one_run(pytester, monkeypatch):
    pytester.makepyfile(test_suite=SUITE)
    base = ("-p", "no:cacheprovider", "--profile")
    pytester.runpytest_subprocess(*base, "--profile-json=whole.json")
    shards = []
    for k in range(3):
        out = f"shard-{k}.json"
        pytester.runpytest_subprocess(*base, f"--profile-json={out}", *TESTS[k::3])
        shards.append(out)
    monkeypatch.chdir(pytester.path)
    code = main(["merge", *shards, "-o", "merged.json", "--html", "m.html", "--markdown", "m.md"])
    assert code == 0
    whole = json.loads((pytester.path / "whole.json").read_text())
    merged = json.loads((pytester.path / "merged.json").read_text())
    parts = [json.loads((pytester.path / s).read_text()) for s in shards]
    assert sorted(merged["tests"]) == sorted(whole["tests"]) == sorted(TESTS)
    for part in parts:  # every figure of every shard, unchanged
        for nodeid, test in part["tests"].items():
            assert merged["tests"][nodeid] == test
    for nodeid, test in whole["tests"].items():
        mine = merged["tests"][nodeid]
        assert mine["outcome"] == test["outcome"], nodeid
        assert _verdicts(mine) == _verdicts(test), nodeid
        # counted figures: the same within the high-water mark's run-to-run noise. Since leak
        # tracking steps are 128 KB (T/80), one test's peak read 1.00 and 1.23 MB more in 4 of
        # 8 runs (not yet explained; 0 of 4 with 1 MB steps), under the peak gate's 10 MB floor.
        assert mine["peak_mb"] == pytest.approx(test["peak_mb"], abs=2.0), nodeid
    assert merged["tests"]["test_suite.py::test_memory_over_budget"]["outcome"] == "failed"
    assert merged["notes"] == whole["notes"]
    page = (pytester.path / "m.html").read_text()
    assert all(json.dumps(n)[1:-1] in page for n in TESTS)
    summary = (pytester.path / "m.md").read_text()
    assert summary.count("## pytest-scalene") == 1 and "test_memory_over_budget" in summary
    assert "1 of" in summary and "gates failed" in summary


def _profile(path, tests: dict, interval: float = 0.01, notes=()) -> str:
    data = {"schema": 1, "interval_s": interval, "clock": "cpu", "notes": list(notes)}
    data["tests"] = tests
    path.write_text(json.dumps(data))
    return str(path)


TEST = {"outcome": "passed", "elapsed_s": 1.0, "cpu_python_s": 0.5, "cpu_native_s": 0.1,
        "cpu_system_s": 0.0, "lines": []}  # fmt: skip


@pytest.mark.parametrize(
    ("second", "message"),
    [
        ({"tests": {"t.py::a": TEST}}, "test t.py::a is also in .*a.json: shards must not overlap"),
        ({"tests": {"t.py::b": TEST}, "interval": 0.02}, "same --profile-interval"),
        (
            {"tests": {"t.py::b": TEST}, "notes": ["unfinished: this file was written when x"]},
            "an unfinished profile",
        ),
    ],
)
def test_merge_refuses_shards_that_do_not_fit_together(tmp_path, capsys, second, message):
    first = _profile(tmp_path / "a.json", {"t.py::a": TEST})
    other = _profile(
        tmp_path / "b.json", second["tests"], second.get("interval", 0.01), second.get("notes", ())
    )
    out = tmp_path / "m.json"
    assert main(["merge", first, other, "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pytest-scalene merge: error: ") and "Traceback" not in err
    assert __import__("re").search(message, err) and not out.exists()


def test_merge_adds_up_the_tests_each_shard_could_not_judge(tmp_path, capsys):
    ab = {"gate": "the A/B comparison (--profile-compare-ref)", "tests": 2, "fails": True}
    new = {"gate": "the A/B comparison: nothing to compare", "tests": 1, "fails": False}
    paths = []
    for name, unjudged in (("a", [ab, new]), ("b", [{**ab, "tests": 3}]), ("c", None)):
        path = _profile(tmp_path / f"{name}.json", {f"t.py::{name}": TEST})
        if unjudged is not None:  # c: a profile written before the key existed
            data = json.loads((tmp_path / f"{name}.json").read_text())
            (tmp_path / f"{name}.json").write_text(json.dumps({**data, "unjudged": unjudged}))
        paths.append(path)
    out, summary = tmp_path / "m.json", tmp_path / "m.md"
    assert main(["merge", *paths, "-o", str(out), "--markdown", str(summary)]) == 0
    assert json.loads(out.read_text())["unjudged"] == [{**ab, "tests": 5}, new]
    assert "**6 passing test(s) not judged**: 5 by the A/B" in summary.read_text()
    broken = _profile(tmp_path / "d.json", {"t.py::d": TEST})
    (tmp_path / "d.json").write_text(
        json.dumps({**json.loads((tmp_path / "d.json").read_text()), "unjudged": [{"gate": 1}]})
    )
    assert main(["merge", paths[0], broken, "-o", str(tmp_path / "n.json")]) == 2
    assert "d.json: an 'unjudged' entry is not a gate's count" in capsys.readouterr().err


def test_merge_names_a_file_that_is_not_a_profile(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{ truncated")
    assert main(["merge", str(bad), "-o", str(tmp_path / "m.json")]) == 2
    assert "bad.json: not a JSON profile (truncated or corrupt?)" in capsys.readouterr().err


# -- baselines -----------------------------------------------------------------------------------
def _entry(cpu: float) -> TestEntry:
    line = LineEntry("test_m.py", "test_x", 1, "work()", 5, {"cpu_s": cpu})
    return TestEntry({"cpu_s": cpu}, (line,), 1.0)


def _save(directory, **tests: float) -> None:
    entries = {f"test_m.py::{name}": _entry(cpu) for name, cpu in tests.items()}
    baseline_store.save(directory, entries, 0.01, "cpu", 1)


def test_baselines_saved_by_shards_merge_into_one_directory(tmp_path):
    base, one, two, out = (tmp_path / d for d in ("base", "one", "two", "out"))
    _save(base, test_a=1.0, test_b=2.0, test_c=3.0)
    for shard in (one, two):
        _save(shard, test_a=1.0, test_b=2.0, test_c=3.0)  # each shard starts from a copy
    _save(one, test_a=1.5)  # shard one ran test_a
    _save(two, test_b=2.5, test_d=4.0)  # shard two ran test_b and a new test
    (path,) = merge_dirs([one, two], out, base=base)
    tests = baseline_store.read(path).tests
    cpu = {n.split("::")[1]: e.metrics["cpu_s"] for n, e in tests.items()}
    assert cpu == {"test_a": 1.5, "test_b": 2.5, "test_c": 3.0, "test_d": 4.0}


def test_two_shards_saving_one_test_differently_is_a_conflict(tmp_path, capsys):
    base, one, two = (tmp_path / d for d in ("base", "one", "two"))
    for d in (base, one, two):
        _save(d, test_a=1.0)
    _save(one, test_a=1.5)
    _save(two, test_a=1.7)
    with pytest.raises(BaselineMergeError, match=r"test_m.py::test_a: saved differently in"):
        merge_dirs([one, two], tmp_path / "out", base=base)
    code = main(["merge-baselines", str(one), str(two), "-o", str(tmp_path / "out")])
    assert code == 2 and "give --base" in capsys.readouterr().err


def _saver(directory: str, worker: int) -> None:
    for k in range(15):
        _save(directory, **{f"test_w{worker}_{k}": float(k)})


def test_shards_saving_into_one_directory_at_once_lose_no_test(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    savers = [ctx.Process(target=_saver, args=(str(tmp_path), w)) for w in range(6)]
    for p in savers:
        p.start()
    for p in savers:
        p.join(120)
    assert [p.exitcode for p in savers] == [0] * 6
    tests = baseline_store.read(tmp_path / "test_m.py.json").tests
    assert len(tests) == 6 * 15
