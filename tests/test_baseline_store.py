"""Baseline files: the layout, a round trip, and a strict reader whose only error is a
BaselineError naming the file (hypothesis feeds it random bytes and random JSON)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_scalene.core.model import LineKey, TestProfile
from pytest_scalene.gates import baseline_entry
from pytest_scalene.gates import baseline_store as store
from pytest_scalene.gates.baseline_store import BaselineError, LineEntry, ModuleBaseline, TestEntry

MODULE = "tests/test_etl.py"


def sample() -> ModuleBaseline:
    line = LineEntry(
        MODULE, "load_frame", 2, "frame = read(path)", 42, {"cpu_s": 0.5, "peak_mb": 80.0}
    )
    entry = TestEntry({"cpu_s": 0.75, "peak_mb": 81.0}, (line,), elapsed_s=0.9)
    return ModuleBaseline(MODULE, 0.01, "cpu", 3, {f"{MODULE}::test_load": entry})


def test_round_trip_is_stable_and_sorted(tmp_path):
    path = store.write(tmp_path, sample())
    assert path == tmp_path / "tests" / "test_etl.py.json"
    text = path.read_text()
    assert store.loads(text, path) == sample()
    assert store.dumps(store.read(path)) == text  # re-writing an unchanged baseline: no diff
    data = json.loads(text)
    assert list(data) == sorted(data) and data["schema"] == store.BASELINE_SCHEMA


def test_a_kept_cpu_distribution_is_rewritten_byte_for_byte(tmp_path):
    # An unchanged entry is read and written back at a re-save: its count of runs was read as
    # a number and written back as 3.0, a diff in every file.
    entry = sample().tests[f"{MODULE}::test_load"]
    cpu = {"min": 0.7, "median": 0.75, "p90": 0.8, "span_s": 2.4, "runs": 3}
    baseline = ModuleBaseline(
        MODULE, 0.01, "cpu", 3, {f"{MODULE}::test_load": replace(entry, cpu=cpu)}
    )
    path = store.write(tmp_path, baseline)
    assert '"runs": 3,' in path.read_text()
    assert store.dumps(store.read(path)) == path.read_text()


def test_entry_keys_lines_by_function_offset_and_text(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / MODULE).write_text(
        "def load_frame(path):\n    x = 1\n    frame   =  read( path )\n"
    )
    profile = TestProfile(f"{MODULE}::test_load", elapsed_s=1.0, cpu_python_s=0.5)
    stats = profile.line(LineKey(MODULE, 3, "load_frame"), function_line=1)
    stats.cpu_python_s = 0.5
    stats.extra.update(peak_mb=12.5, python_alloc_fraction=0.3)  # not compared: not stored
    profile.extra["peak_mb"] = 12.5
    entry = baseline_entry.entry_from_profile(profile, str(tmp_path))
    assert entry.metrics == {"cpu_s": 0.5, "peak_mb": 12.5, "alloc_mb": 0.0, "copy_mb": 0.0}
    assert entry.lines == (
        LineEntry(
            MODULE, "load_frame", 2, "frame = read( path )", 3, {"cpu_s": 0.5, "peak_mb": 12.5}
        ),
    )


def test_long_source_lines_are_shortened_with_a_hash():
    a, b = "x = " + "1" * 300, "x = " + "1" * 299 + "2"
    assert len(baseline_entry.normalise(a)) <= baseline_entry.TEXT_LIMIT
    assert baseline_entry.normalise(a) != baseline_entry.normalise(b)


def test_paths_stay_inside_the_baseline_directory(tmp_path):
    assert (
        store.path_for(tmp_path, "../other/test_x.py") == tmp_path / "_parent_/other/test_x.py.json"
    )
    assert store.path_for(tmp_path, "/abs/test_x.py") == tmp_path / "abs/test_x.py.json"


def test_save_keeps_tests_that_did_not_run_and_replaces_unreadable_files(tmp_path):
    store.write(tmp_path, sample())
    other = TestEntry({"cpu_s": 0.1}, (), 0.2)
    [(path, count, warning)] = store.save(
        tmp_path, {f"{MODULE}::test_other": other}, 0.01, "cpu", 1
    )
    assert (count, warning) == (1, None)
    assert sorted(store.read(path).tests) == [f"{MODULE}::test_load", f"{MODULE}::test_other"]
    path.write_text("{ truncated")
    [(_, _, warning)] = store.save(tmp_path, {f"{MODULE}::test_other": other}, 0.01, "cpu", 1)
    assert warning.startswith("replaced an unreadable file (not valid JSON")
    assert list(store.read(path).tests) == [f"{MODULE}::test_other"]


# -- bad files: every problem is a BaselineError naming the file ----------------------------------
def _edited(edit) -> str:
    data = store.to_dict(sample())
    edit(data)
    return json.dumps(data)


TEST = f"tests[{MODULE + '::test_load'!r}]"
BAD = {
    "empty": ("", "empty file (truncated?)"),
    "truncated": (store.dumps(sample())[:200], "not valid JSON (truncated or corrupt?)"),
    "binary": (b"\xff\xfe\x00garbage", "not UTF-8 text (corrupt?)"),
    "not an object": ("[1, 2]", "expected an object, got a list"),
    "newer schema": (
        _edited(lambda d: d.update(schema=2)),
        "written by a newer pytest-scalene (baseline schema 2; this version reads schema 1)",
    ),
    "schema as text": (_edited(lambda d: d.update(schema="1")), 'schema: expected 1, got "1"'),
    "other kind": (_edited(lambda d: d.update(kind="x")), "kind: expected 'pytest-scalene"),
    "missing key": (_edited(lambda d: d.pop("tests")), "missing key 'tests'"),
    "typo in a key": (
        _edited(lambda d: d["tests"][f"{MODULE}::test_load"].update(metircs={})),
        f"{TEST}: unexpected key 'metircs' (edited by hand?)",
    ),
    "value as text": (
        _edited(lambda d: d["tests"][f"{MODULE}::test_load"]["metrics"].update(cpu_s="fast")),
        f'{TEST}.metrics.cpu_s: expected a finite non-negative number, got "fast"',
    ),
    "negative value": (
        _edited(
            lambda d: d["tests"][f"{MODULE}::test_load"]["lines"][0]["metrics"].update(peak_mb=-1)
        ),
        f"{TEST}.lines[0].metrics.peak_mb: expected a finite non-negative number, got -1",
    ),
    "NaN": (
        store.dumps(sample()).replace('"cpu_s": 0.75', '"cpu_s": NaN'),
        f"{TEST}.metrics.cpu_s: expected a finite non-negative number, got NaN",
    ),
    "line number as text": (
        _edited(lambda d: d["tests"][f"{MODULE}::test_load"]["lines"][0].update(line="42")),
        f'{TEST}.lines[0].line: expected a whole number >= 0, got "42"',
    ),
    "test of another module": (
        _edited(
            lambda d: d["tests"].update({"tests/x.py::t": d["tests"].pop(f"{MODULE}::test_load")})
        ),
        "tests['tests/x.py::t']: is not a test of module 'tests/test_etl.py'",
    ),
    "deep nesting": ("[" * 100_000, "not a baseline: JSON nested too deeply"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_files_are_errors_naming_the_file_and_the_place(case, tmp_path):
    content, expected = BAD[case]
    path = tmp_path / "tests" / "test_etl.py.json"
    path.parent.mkdir()
    (path.write_bytes if isinstance(content, bytes) else path.write_text)(content)
    with pytest.raises(BaselineError) as info:
        store.read(path)
    assert str(info.value).startswith(f"baseline file {path}: ")
    assert expected in str(info.value)


def test_load_dir_reports_every_bad_file_and_a_misplaced_one(tmp_path):
    store.write(tmp_path, sample())
    (tmp_path / "tests" / "test_bad.py.json").write_text("{")
    moved = tmp_path / "moved.json"
    moved.write_text(store.dumps(sample()))
    (tmp_path / "README.md").write_text("not a baseline")  # only *.json files are read
    found, errors = store.load_dir(tmp_path)
    assert list(found) == [MODULE]
    assert len(errors) == 2
    assert any(str(moved) in e and "belongs in" in e for e in errors)
    assert any("test_bad.py.json: not valid JSON" in e for e in errors)


# -- property tests -----------------------------------------------------------------------------
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(st.binary(max_size=300))
def test_random_bytes_raise_only_baseline_errors(data):
    try:
        store.loads(data, "b.json")
    except BaselineError as exc:
        assert str(exc).startswith("baseline file b.json: ")


@given(json_values)
def test_random_json_raises_only_baseline_errors(value):
    with pytest.raises(BaselineError):
        store.loads(json.dumps(value), "b.json")


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_edits_of_a_valid_file_load_or_raise_baseline_errors(data):
    document = store.to_dict(sample())
    # Walk to a random place in the document and put a random value there.
    node, key = document, None
    while True:
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        key = data.draw(st.sampled_from(keys))
        child = node[key]
        if not isinstance(child, (dict, list)) or not child or data.draw(st.booleans()):
            break
        node = child
    node[key] = data.draw(json_values)
    try:
        loaded = store.loads(json.dumps(document), "b.json")
    except BaselineError:
        return
    assert store.loads(store.dumps(loaded), "b.json") == loaded  # what loads, writes back


numbers = st.floats(min_value=0, max_value=1e6, allow_nan=False)
metric_dicts = st.dictionaries(st.sampled_from(["cpu_s", "peak_mb", "alloc_mb"]), numbers)
line_entries = st.builds(
    LineEntry,
    file=st.just(MODULE),
    function=st.text(min_size=1, max_size=10),
    offset=st.integers(-5, 500),
    text=st.text(max_size=40),
    line=st.integers(0, 10_000),
    metrics=metric_dicts,
)


@given(
    st.dictionaries(
        st.text(min_size=1, max_size=10).map(lambda s: f"{MODULE}::{s}"),
        st.builds(
            TestEntry, metrics=metric_dicts, lines=st.tuples(line_entries), elapsed_s=numbers
        ),
        max_size=3,
    )
)
def test_any_valid_baseline_round_trips(tests):
    baseline = ModuleBaseline(MODULE, 0.01, "cpu", 1, tests)
    assert store.loads(store.dumps(baseline), Path("b.json")) == baseline


def test_the_cpu_distribution_commit_and_line_shares_are_recorded_and_read_back(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / MODULE).write_text("def load_frame(path):\n    x = 1\n    frame = read(path)\n")
    profile = TestProfile(f"{MODULE}::test_load", elapsed_s=1.0, cpu_python_s=0.4)
    profile.extra.update(cpu_runs=[0.5, 0.4, 0.45, 0.9, 0.42], cpu_runs_span_s=2.5)
    stats = profile.line(LineKey(MODULE, 3, "load_frame"), function_line=1)
    stats.cpu_python_s, stats.samples = 0.3, 30
    entry = baseline_entry.entry_from_profile(profile, str(tmp_path), "abc123")
    assert entry.cpu == {"min": 0.4, "median": 0.45, "p90": 0.9, "span_s": 2.5, "runs": 5}
    assert entry.commit == "abc123"
    assert (entry.lines[0].share, entry.lines[0].samples) == (0.75, 30)
    baseline = ModuleBaseline(MODULE, 0.01, "cpu", 5, {f"{MODULE}::test_load": entry})
    back = store.loads(store.dumps(baseline), "b.json").tests[f"{MODULE}::test_load"]
    assert (back.cpu, back.commit) == (entry.cpu, "abc123")
    assert (back.lines[0].share, back.lines[0].samples) == (0.75, 30)
    single = TestProfile(f"{MODULE}::test_one", elapsed_s=0.3, cpu_python_s=0.2)
    assert baseline_entry.entry_from_profile(single, str(tmp_path)).cpu == {
        "min": 0.2,
        "median": 0.2,
        "p90": 0.2,
        "span_s": 0.3,
        "runs": 1,
    }


def test_files_without_the_distribution_commit_or_shares_are_read_and_rewritten_alike(tmp_path):
    text = store.dumps(sample())  # the format before these keys: none of them
    assert '"cpu": {' not in text and "commit" not in text and "share" not in text
    assert store.dumps(store.loads(text, "old.json")) == text
    bad = json.loads(store.dumps(sample()))
    bad["tests"][f"{MODULE}::test_load"]["lines"][0]["samples"] = -1
    with pytest.raises(BaselineError, match=r"lines\[0\]\.samples: expected a whole number"):
        store.loads(json.dumps(bad), "bad.json")
