"""Fuzzing the JSON profile: any SessionProfile the samplers could build (finite figures, any
file and function names, any metrics in the `extra` dicts) is written as standard JSON that keeps
the documented keys and every value (floats rounded to 6 digits), and survives the xdist
transport (codec.test_to_dict -> codec.profile_from_dict) unchanged."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_scalene.core import codec
from pytest_scalene.core.codec import profile_from_dict
from pytest_scalene.core.model import (
    SCHEMA_VERSION,
    LineKey,
    LineStats,
    SessionProfile,
    TestProfile,
)
from pytest_scalene.reports.json_report import write_json

LINE_KEYS = ("file", "line", "function", "function_line", "cpu_python_s", "cpu_native_s")
LINE_KEYS += ("cpu_system_s", "samples")
TEST_KEYS = ("outcome", "elapsed_s", "cpu_python_s", "cpu_native_s", "cpu_system_s", "lines")

seconds = st.floats(0, 1e6, allow_nan=False)
figures = st.floats(-1e9, 1e9, allow_nan=False, allow_infinity=False)
names = st.text(max_size=12)  # any Unicode: file paths and function names are not ASCII-only
# What samplers put in `extra`: numbers, strings, flags, timelines, lists of leak records.
extra_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | figures | names,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=3),
    max_leaves=8,
)


def extras(reserved: tuple[str, ...]) -> st.SearchStrategy[dict]:
    return st.dictionaries(names.filter(lambda k: k not in reserved), extra_values, max_size=4)


line_stats = st.builds(
    LineStats,
    function_line=st.integers(0, 10**6),
    cpu_python_s=seconds,
    cpu_native_s=seconds,
    cpu_system_s=seconds,
    samples=st.integers(0, 10**6),
    extra=extras(LINE_KEYS),
)
line_keys = st.builds(LineKey, file=names, line=st.integers(0, 10**6), function=names)


@st.composite
def profiles_for(draw, nodeid: str) -> TestProfile:
    profile = TestProfile(
        nodeid,
        outcome=draw(st.sampled_from(["passed", "failed", "skipped", "unknown"])),
        elapsed_s=draw(seconds),
        cpu_python_s=draw(seconds),
        cpu_native_s=draw(seconds),
        cpu_system_s=draw(seconds),
        extra=draw(extras(TEST_KEYS)),
    )
    profile.lines = draw(st.dictionaries(line_keys, line_stats, max_size=4))
    return profile


@st.composite
def sessions(draw) -> SessionProfile:
    session = SessionProfile(
        interval_s=draw(st.floats(1e-6, 10)),
        clock=draw(st.sampled_from(["cpu", "wall"])),
        notes=draw(st.lists(names, max_size=3)),
    )
    for nodeid in draw(st.lists(names, max_size=3, unique=True)):
        session.tests[nodeid] = draw(profiles_for(nodeid))
    return session


def rounded(value):  # noqa: ANN001, ANN201
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, list):
        return [rounded(v) for v in value]
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    return value


def strict_loads(text: str):  # noqa: ANN201
    """json.loads that refuses NaN and Infinity, as browsers and jq do."""

    def refuse(constant: str):  # noqa: ANN202
        raise ValueError(f"non-standard JSON constant {constant}")

    return json.loads(text, parse_constant=refuse)


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(sessions())
def test_written_json_keeps_every_key_and_value(tmp_path_factory, session):
    path = tmp_path_factory.mktemp("json") / "profile.json"
    write_json(session, path)
    data = strict_loads(path.read_text(encoding="utf-8"))
    assert data["schema"] == SCHEMA_VERSION
    assert data["interval_s"] == session.interval_s
    assert (data["clock"], data["notes"]) == (session.clock, session.notes)
    assert list(data["tests"]) == list(session.tests)  # in the order the tests ran
    for nodeid, profile in session.tests.items():
        test = data["tests"][nodeid]
        assert set(TEST_KEYS) <= test.keys()
        assert test["outcome"] == profile.outcome
        for key in ("elapsed_s", "cpu_python_s", "cpu_native_s", "cpu_system_s"):
            assert test[key] == round(getattr(profile, key), 6)
        assert {k: test[k] for k in profile.extra} == rounded(profile.extra)
        # lines sorted by (file, line, function), each with its figures and extras
        keys = sorted(profile.lines)
        assert [(ln["file"], ln["line"], ln["function"]) for ln in test["lines"]] == [
            (k.file, k.line, k.function) for k in keys
        ]
        for line, key in zip(test["lines"], keys, strict=True):
            stats = profile.lines[key]
            assert set(LINE_KEYS) <= line.keys()
            assert line["function_line"] == stats.function_line
            assert line["samples"] == stats.samples
            assert line["cpu_python_s"] == round(stats.cpu_python_s, 6)
            assert {k: line[k] for k in stats.extra} == rounded(stats.extra)


@given(st.text(max_size=12).flatmap(profiles_for))
def test_xdist_transport_loses_nothing(profile):
    sent = json.loads(json.dumps(codec.test_to_dict(profile)))
    received = profile_from_dict(profile.nodeid, sent)
    # what the controller writes is what the worker had
    assert codec.test_to_dict(received) == sent
    assert sorted(received.lines) == sorted(profile.lines)
