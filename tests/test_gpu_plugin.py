"""pytest --profile with a fake NVML (tests/fake_nvml.py, installed as pynvml by the sample
suite's conftest): the JSON keys, the notes and --profile-gpu, end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # each runs pytest in a subprocess (2-5 s on 2 busy cores)
FAKE_SOURCE = (Path(__file__).parent / "fake_nvml.py").read_text()
CONFTEST = """
import json, os, sys
import fake_nvml
state = os.environ.get("FAKE_NVML")
if state == "missing":
    sys.modules["pynvml"] = None  # import pynvml fails
else:
    sys.modules["pynvml"] = fake_nvml.FakeNvml(**json.loads(state or "{}")).module
"""
PHASES = """
import pynvml
def test_phases():
    pynvml.state.process_mb, pynvml.state.util = 1024, 5
    a = sum(i * i for i in range(2_000_000))  # holds 1 GiB
    pynvml.state.process_mb, pynvml.state.util = 1536, 90
    b = sum(i * i for i in range(2_000_000))  # kernels running
    assert pynvml.state.calls["nvmlInit"] == 1
"""
NO_MEMORY = ("--profile-memory=no",)  # these tests are about the GPU: spare the shim's start-up


@pytest.fixture
def gpu_suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    def make(state: dict | str) -> None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        monkeypatch.setenv("FAKE_NVML", state if isinstance(state, str) else json.dumps(state))
        pytester.makepyfile(fake_nvml=FAKE_SOURCE)
        pytester.makeconftest(CONFTEST)

    return make


def lines_at(test: dict, path: Path, text: str) -> list[dict]:
    """The entries (the function's, its generator's) at the line holding `text` that carry GPU
    figures: a sample taken while the GPU read budget was spent may leave an entry without."""
    source = path.read_text().splitlines()
    number = next(i for i, line in enumerate(source, 1) if text in line)
    found = [ln for ln in test["lines"] if ln["line"] == number and "gpu_peak_mb" in ln]
    assert found, f"no GPU reading at line {number}: {test['lines']}"
    return found


def test_figures_land_on_their_lines_in_the_json(gpu_suite, run_profiled, pytester) -> None:
    gpu_suite({"accounting": True})
    result, profile = run_profiled(PHASES, *NO_MEMORY)
    result.assert_outcomes(passed=1)
    test = profile["tests"]["test_workload.py::test_phases"]
    path = pytester.path / "test_workload.py"
    for line in lines_at(test, path, "holds 1 GiB"):
        assert (line["gpu_peak_mb"], line["gpu_util_percent"]) == (1024.0, 5.0)
    for line in lines_at(test, path, "kernels running"):
        assert (line["gpu_peak_mb"], line["gpu_util_percent"]) == (1536.0, 90.0)
    assert test["gpu_peak_mb"] == 1536.0 and test["gpu_memory_scope"] == "process"
    # No GPU note but the one on slow reads, which a loaded machine gives (the fake's reads
    # are Python calls: 99 us each once, with valgrind running beside it).
    notes = [note for note in profile["notes"] if "NVML reads are slow here" not in note]
    assert not any("gpu" in note.lower() for note in notes)
    # the terminal summary ranks the tests by GPU memory
    result.stdout.fnmatch_lines(
        ["Top tests by GPU memory:", "*1536 MB*test_workload.py::test_phases"]
    )


def test_device_totals_are_flagged(gpu_suite, run_profiled) -> None:
    gpu_suite({"process_list_error": 3, "device_used_mb": 4000})
    source = "def test_a():\n    assert sum(range(1000)) > 0\n"
    result, profile = run_profiled(source, *NO_MEMORY)
    result.assert_outcomes(passed=1)
    test = profile["tests"]["test_workload.py::test_a"]
    assert test["gpu_peak_mb"] == 4000.0 and test["gpu_memory_scope"] == "device"
    assert any("whole device (Fake GPU 0)" in note for note in profile["notes"])


def test_no_pynvml_columns_absent_and_said_once(gpu_suite, run_profiled) -> None:
    gpu_suite("missing")
    source = "def test_a():\n    pass\n\ndef test_b():\n    pass\n"
    result, profile = run_profiled(source, *NO_MEMORY)
    result.assert_outcomes(passed=2)
    said = " ".join(result.stdout.str().split())  # the note, however it wrapped
    assert said.count("GPU columns absent: pynvml is not installed") == 1
    notes = [n for n in profile["notes"] if "GPU" in n]
    assert notes == [
        "GPU columns absent: pynvml is not installed (pip install 'pytest-scalene[gpu]')"
    ]
    for test in profile["tests"].values():
        assert "gpu_peak_mb" not in test
        assert not any(k.startswith("gpu_") for ln in test["lines"] for k in ln)


def test_profile_gpu_no_never_loads_nvml(gpu_suite, run_profiled) -> None:
    gpu_suite({})
    source = "import pynvml\ndef test_a():\n    assert pynvml.state.calls['nvmlInit'] == 0\n"
    result, profile = run_profiled(source, "--profile-gpu=no", *NO_MEMORY)
    result.assert_outcomes(passed=1)
    assert "gpu_peak_mb" not in profile["tests"]["test_workload.py::test_a"]


def test_profile_gpu_yes_without_gpu_is_a_usage_error(gpu_suite, pytester) -> None:
    gpu_suite({"init_error": 9})  # NVML_ERROR_DRIVER_NOT_LOADED
    pytester.makepyfile("def test_a():\n    pass\n")
    result = pytester.runpytest_subprocess("--profile", "--profile-gpu=yes")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--profile-gpu=yes, but no GPU can be profiled: the NVIDIA driver is not loaded*"]
    )
    assert "Traceback" not in result.stderr.str()
