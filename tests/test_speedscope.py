"""The speedscope export: recorded stacks, the document, and a real run that validates against
speedscope's published JSON schema (tests/data/speedscope-file-format-schema.json)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jsonschema
import pytest

from pytest_scalene.core import model
from pytest_scalene.core.model import SessionProfile
from pytest_scalene.reports.speedscope import to_speedscope
from pytest_scalene.sampling.scope import CodeScope
from pytest_scalene.sampling.stack_recorder import OUTSIDE, StackRecorder

SCHEMA = json.loads(
    (Path(__file__).parent / "data" / "speedscope-file-format-schema.json").read_text()
)


def validate(document: dict) -> None:
    jsonschema.Draft6Validator(SCHEMA).validate(document)


def _frame_names(recorder: StackRecorder, stack: tuple[int, ...]) -> list[str]:
    return [recorder.frames[i].name for i in stack]


def _inner(recorder: StackRecorder, profile: model.TestProfile) -> None:
    recorder.on_cpu_sample(profile, sys._getframe(), None, 0.01)


def _outer(recorder: StackRecorder, profile: model.TestProfile) -> None:
    _inner(recorder, profile)
    _inner(recorder, profile)


def test_stacks_start_at_the_outermost_profiled_frame() -> None:
    # This test file is profiled code (inside the rootdir); pytest's frames above it are not.
    recorder = StackRecorder(CodeScope(Path(__file__).parent.parent))
    profile = model.TestProfile("t::x")
    _outer(recorder, profile)
    [(stack, counts)] = recorder.tests["t::x"].stacks.items()
    names = _frame_names(recorder, stack)
    assert names[0] == "test_stacks_start_at_the_outermost_profiled_frame"
    assert names[-2:] == ["_outer", "_inner"]
    assert counts.samples == 2 and counts.cpu_s == pytest.approx(0.02)
    frame = recorder.frames[stack[-1]]
    assert frame.file == "tests/test_speedscope.py" and frame.line == _inner.__code__.co_firstlineno


def test_library_frames_below_profiled_code_are_kept() -> None:
    recorder = StackRecorder(CodeScope(Path(__file__).parent.parent))
    profile = model.TestProfile("t::lib")
    # json calls back into profiled code through the stdlib: the stdlib frames stay in between.
    json.dumps({"k": object()}, default=lambda o: _inner(recorder, profile))
    [stack] = recorder.tests["t::lib"].stacks
    names = _frame_names(recorder, stack)
    assert "dumps" in names and names[-1] == "_inner"
    assert any(recorder.frames[i].file.endswith("json/__init__.py") for i in stack)


def test_a_stack_without_profiled_code_is_one_outside_frame(tmp_path: Path) -> None:
    recorder = StackRecorder(CodeScope(tmp_path))  # nothing on this stack lives in tmp_path
    profile = model.TestProfile("t::none")
    recorder.on_cpu_sample(profile, sys._getframe(), None, 0.01)
    [stack] = recorder.tests["t::none"].stacks
    assert _frame_names(recorder, stack) == [OUTSIDE]


def _recorded_session(clock: str) -> tuple[SessionProfile, StackRecorder]:
    recorder = StackRecorder(CodeScope(Path(__file__).parent.parent))
    session = SessionProfile(interval_s=0.01, clock=clock)
    for nodeid in ("t::a", "t::b"):
        profile = session.tests[nodeid] = model.TestProfile(nodeid)
        _outer(recorder, profile)
        recorder.on_cpu_sample(profile, sys._getframe(), None, 0.5)
    session.tests["t::no_samples"] = model.TestProfile("t::no_samples")
    return session, recorder


def test_document_validates_and_weights_are_cpu_seconds() -> None:
    session, recorder = _recorded_session("cpu")
    document = to_speedscope(session, recorder)
    validate(document)
    assert [p["name"] for p in document["profiles"]] == ["t::a", "t::b"]  # none for no samples
    profile = document["profiles"][0]
    assert profile["type"] == "sampled" and profile["unit"] == "seconds"
    assert sorted(profile["weights"]) == pytest.approx([0.02, 0.5])
    assert profile["endValue"] == pytest.approx(0.52)
    frames = document["shared"]["frames"]
    assert all(0 <= i < len(frames) for p in document["profiles"] for s in p["samples"] for i in s)
    assert {"name", "file", "line"} <= frames[profile["samples"][0][-1]].keys()


def test_wall_clock_weights_are_sample_counts_times_interval() -> None:
    session, recorder = _recorded_session("wall")
    weights = to_speedscope(session, recorder)["profiles"][0]["weights"]
    assert sorted(weights) == pytest.approx([0.01, 0.02])


def test_the_schema_rejects_a_broken_document() -> None:
    """The validation above means something: the schema catches a missing or mistyped field."""
    session, recorder = _recorded_session("cpu")
    document = to_speedscope(session, recorder)
    del document["profiles"][0]["weights"]
    with pytest.raises(jsonschema.ValidationError):
        validate(document)
    document = to_speedscope(session, recorder)
    document["profiles"][0]["unit"] = "fortnights"
    with pytest.raises(jsonschema.ValidationError):
        validate(document)


WORKLOAD = """
def spin(n):
    total = 0
    for i in range(n):
        total += i % 7
    return total


def helper():
    return spin(1_500_000)


def test_one():
    assert helper() > 0


def test_two():
    assert spin(1_500_000) > 0
"""


@pytest.mark.slow
def test_plugin_writes_a_valid_speedscope_file(run_profiled, pytester: pytest.Pytester) -> None:
    out = pytester.path / "stacks.speedscope.json"
    result, profile = run_profiled(WORKLOAD, f"--profile-speedscope={out}")
    assert result.ret == 0, result.stdout.str()
    document = json.loads(out.read_text())
    validate(document)
    by_name = {p["name"]: p for p in document["profiles"]}
    assert set(by_name) == {"test_workload.py::test_one", "test_workload.py::test_two"}
    frames = document["shared"]["frames"]
    for nodeid, expected in [
        ("test_workload.py::test_one", ["test_one", "helper", "spin"]),
        ("test_workload.py::test_two", ["test_two", "spin"]),
    ]:
        stacks = [[frames[i]["name"] for i in s] for s in by_name[nodeid]["samples"]]
        assert expected in stacks, stacks
        # The weights are the CPU time the sampler charged to the main thread: they add up to
        # the test's CPU time in the JSON profile (less what other threads used: none here).
        test = profile["tests"][nodeid]
        cpu = test["cpu_python_s"] + test["cpu_native_s"] + test["cpu_system_s"]
        assert by_name[nodeid]["endValue"] == pytest.approx(cpu, rel=0.05, abs=0.002)
    spin = next(f for f in frames if f["name"] == "spin")
    source = (pytester.path / "test_workload.py").read_text().splitlines()
    assert spin["file"] == "test_workload.py"
    assert source[spin["line"] - 1] == "def spin(n):"


def test_no_stacks_are_recorded_without_the_option(pytester: pytest.Pytester) -> None:
    from pytest_scalene.profiling_session import RUN_KEY

    run = pytester.parseconfigure("--profile").stash[RUN_KEY]
    assert run.stacks is None
    assert not any(isinstance(x, StackRecorder) for x in run.profiler.listeners)
    run = pytester.parseconfigure("--profile", "--profile-speedscope=x.json").stash[RUN_KEY]
    assert run.stacks in run.profiler.listeners


def test_a_directory_is_refused_as_the_output_path(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--profile-speedscope", str(pytester.path))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--profile-speedscope: expected a file path*directory*"])


def test_payload_round_trip_renumbers_frames() -> None:
    """pytest-xdist: a worker's stacks reach the controller as plain data and merge there."""
    session, worker = _recorded_session("cpu")
    controller = StackRecorder(CodeScope(Path(__file__).parent.parent))
    controller.on_cpu_sample(model.TestProfile("t::c"), None, None, 0.1)  # frame 0: OUTSIDE
    controller.merge_payload(json.loads(json.dumps(worker.to_payload())))
    controller.merge_payload(json.loads(json.dumps(worker.to_payload())))  # a second worker
    assert controller.frames[0].name == OUTSIDE and len(controller.frames) == len(worker.frames) + 1
    for nodeid, test in worker.tests.items():
        merged = controller.tests[nodeid].stacks
        for stack, counts in test.stacks.items():
            names = _frame_names(worker, stack)
            [(key, got)] = [
                (k, c) for k, c in merged.items() if _frame_names(controller, k) == names
            ]
            assert got.samples == 2 * counts.samples and got.cpu_s == pytest.approx(
                2 * counts.cpu_s
            )
    validate(to_speedscope(session, controller))


@pytest.mark.slow
def test_speedscope_file_with_xdist(run_profiled, pytester: pytest.Pytester) -> None:
    out = pytester.path / "stacks.speedscope.json"
    result, _ = run_profiled(WORKLOAD, "-n", "2", f"--profile-speedscope={out}")
    assert result.ret == 0, result.stdout.str()
    document = json.loads(out.read_text())
    validate(document)
    names = {p["name"] for p in document["profiles"]}
    assert names == {"test_workload.py::test_one", "test_workload.py::test_two"}
    frames = {f["name"] for f in document["shared"]["frames"]}
    assert {"test_one", "test_two", "helper", "spin"} <= frames
