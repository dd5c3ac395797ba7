"""The product's own hot paths, gated by instruction counts in CI (.ci/run): a change that makes
one of them do more work fails the project's build, however noisy the machine. Baselines:
baselines/benchmarks/hot_paths/ (re-save with the command in docs/baselines.md, "Dogfooding").

Each test runs one path on fixed synthetic data: a profiled test's start and stop, the
sampler's per-sample line lookup, the
baseline comparison of a 200-line test, the timeline reduction, the baseline file's round trip,
the terminal summary of a 300-test session, the callgrind reader, and the allocator shim's
malloc, free and memcpy (native/shim.cpp), which every allocation of a profiled process pays.
"""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path

import pytest

from pytest_scalene.config.options import ProfileOptions
from pytest_scalene.core import runenv
from pytest_scalene.core.model import LineKey, SessionProfile, TestProfile
from pytest_scalene.gates import baseline_entry, baseline_store, comparison
from pytest_scalene.instructions import callgrind_out
from pytest_scalene.reports import terminal_summary
from pytest_scalene.sampling import timeline
from pytest_scalene.sampling.profiler import Profiler
from pytest_scalene.sampling.scope import CodeScope

ROOT = str(Path(__file__).resolve().parent)
# sysconfig reads its paths once a process: warmed here, so that no test's count depends on
# whether another test ran before it (a test counted alone read 4 M more).
CodeScope(ROOT)


def _profile(nodeid: str, lines: int, scale: float = 1.0) -> TestProfile:
    profile = TestProfile(nodeid, outcome="passed", cpu_python_s=1.0 * scale, elapsed_s=1.0)
    for i in range(lines):
        stats = profile.line(LineKey("test_x.py", 10 + i, f"f{i % 7}"), function_line=i - i % 7)
        stats.cpu_python_s = 0.01 * (i % 13) * scale
        stats.cpu_native_s = 0.005 * (i % 5)
        stats.samples = i % 11
        stats.extra.update(peak_mb=float(i % 17), alloc_mb=float(i % 19), copy_mb=float(i % 3))
    profile.extra.update(peak_mb=40.0, alloc_mb=90.0, copy_mb=20.0)
    return profile


# What a session does once is built in fixtures, which are not counted (only a test's call is):
# it resolves paths (os.path.realpath walks every directory of the checkout and of the venv), so
# its count grows with where the project is checked out: CI's checkout, deeper than the one
# these baselines were saved in, read +3% on the lifecycle from that alone.


@pytest.fixture
def scope() -> CodeScope:
    scope = CodeScope(ROOT)
    scope.relative_name(__file__)  # decided once per file (a realpath), then looked up: warmed
    return scope


def test_sampler_line_lookup(scope):
    frame = sys._getframe()
    for _ in range(2_000):
        scope.locate(frame)


@pytest.fixture
def profiler():
    options = ProfileOptions(enabled=True, interval_s=1000.0, memory="no", gpu="no")
    profiler = Profiler(options, ROOT)
    yield profiler
    profiler.close()


def test_per_test_lifecycle(profiler):
    # What every profiled test pays, however short: the CPU sampler started and stopped around
    # it (the signal and timer checked, armed, the clocks read, the last interval charged), the
    # signal guard and blocking-call patches applied and undone. An interval no test reaches:
    # no sample lands, under valgrind either, so the count is the lifecycle's alone.
    for i in range(200):
        with profiler.profiling(f"test_x.py::test_{i}"):
            pass
    # Profiled itself (outside valgrind), the test finds SIGPROF held: a POSIX timer stands in.
    assert len(profiler.session.tests) == 200
    assert not [note for note in profiler.session.notes if "fail" in note or "error" in note]


def test_baseline_comparison():
    before = baseline_entry.entry_from_profile(_profile("t::a", 200), ROOT)
    after = baseline_entry.entry_from_profile(_profile("t::a", 200, scale=1.1), ROOT)
    rule = comparison.NoiseRule()
    for _ in range(5):
        comparison.compare(before, after, rule)


def test_timeline_reduction():
    points = [(i * 0.001, float((i * 7919) % 1000)) for i in range(5_000)]
    assert len(timeline.reduce(points)) <= 100


def test_baseline_file_round_trip():
    entries = {
        f"t.py::test_{i}": baseline_entry.entry_from_profile(_profile(f"t.py::test_{i}", 20), ROOT)
        for i in range(50)
    }
    module = baseline_store.ModuleBaseline("t.py", 0.01, "cpu", 1, entries)
    assert (
        baseline_store.loads(baseline_store.dumps(module), "t.json").tests.keys() == entries.keys()
    )


def test_terminal_summary():
    session = SessionProfile(interval_s=0.01, clock="cpu")
    for i in range(300):
        session.tests[f"test_x.py::test_{i}"] = _profile(f"test_x.py::test_{i}", 5, 1 + i % 3)
    assert terminal_summary.render_summary(session, ROOT)


def test_callgrind_reader(tmp_path):
    body = "".join(
        f"fn=({i}) f{i}\n{i} {i * 10}\ncfn=({i + 1}) f{i + 1}\ncalls=1 0\n0 5\n"
        for i in range(2_000)
    )
    path = tmp_path / "callgrind.out.1"
    path.write_text(f"# callgrind format\nevents: Ir\n{body}totals: 123\n")
    assert callgrind_out.parse(path).total == 123


def test_allocation_path():
    # A loop in C (the shim's pytest_scalene_exercise): counted from Python, the interpreter's
    # ~1,800 instructions a bytearray hid the shim's ~80 a pair.
    shim = runenv.shim_path()
    if shim is None or not shim.is_file():
        pytest.skip("the allocator shim is not built")
    library = ctypes.CDLL(str(shim))
    library.pytest_scalene_exercise.restype = ctypes.c_long
    made = library.pytest_scalene_exercise(ctypes.c_void_p(library._handle), ctypes.c_long(50_000))
    assert made == 50_000
