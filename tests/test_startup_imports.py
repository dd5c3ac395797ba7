"""What a session pays before its first test: every session with the plugin installed imports
it, so it imports what the session's options use, leaves pytest's assertion rewriting (which,
where bytecode is not written, parses and compiles each module again every session) and runs
git only to record a baseline's commit. A session that does not profile (no option of ours, no
perf_budget marker among its tests) builds no profiler and runs no hook of ours per test."""

from __future__ import annotations

import importlib.util

import pytest

# Checked from inside a session: which of the plugin's modules it imported, and how.
INSIDE = """
import sys

def test_modules():
    ours = {n: m for n, m in sys.modules.items() if n.startswith("pytest_scalene")}
    # The package's __init__ is loaded by the hook: it is what takes the package out of it.
    hooked = [n for n, m in ours.items() if type(m.__loader__).__name__ == "AssertionRewritingHook"]
    assert hooked == ["pytest_scalene"], hooked
    optional = ("compare_ref.ab_run", "history.store", "reports.markdown_report",
                "reports.html_report", "selection.prepass", "instructions.runner",
                "gates.baseline_store", "gates.comparison", "selection.code_map")
    present = [n for n in optional if "pytest_scalene." + n in ours]
    assert present == [], present
"""


@pytest.mark.parametrize("mode", [[], ["--profile"], ["--profile", "--profile-memory=no"]])
def test_a_session_imports_only_what_its_options_use(pytester: pytest.Pytester, mode):
    pytester.makepyfile(test_inside=INSIDE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *mode)
    result.assert_outcomes(passed=1)


# A profiling session without memory, the JSON file or xdist: what only those use stays out.
CPU_ONLY = """
import sys

def test_modules():
    ours = {n for n in sys.modules if n.startswith("pytest_scalene.")}
    unused = {"_native", "sampling.in_process_hooks", "sampling.memory_sampler",
              "gates.leak_confirm", "sampling.gpu_nvml", "reports.json_report", "core.codec",
              "xdist.worker_profiles", "core.atomic_write"}
    assert not {"pytest_scalene." + n for n in unused} & ours, sorted(ours)
    assert "pytest_scalene.sampling.cpu_sampler" in ours  # it did profile
"""


def test_a_cpu_only_session_leaves_out_the_memory_and_output_modules(pytester: pytest.Pytester):
    pytester.makepyfile(test_inside=CPU_ONLY)
    args = ("-p", "no:cacheprovider", "--profile", "--profile-memory=no", "--profile-gpu=no")
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=1)


def test_git_runs_only_to_record_a_baseline(pytester: pytest.Pytester):
    # A git on PATH that leaves a trace: a session that saves no baseline never calls it
    # (in a large repository `git status` alone takes seconds).
    log = pytester.path / "git.log"
    fake = pytester.mkdir("bin") / "git"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexit 1\n')
    fake.chmod(0o755)
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    path = f"{fake.parent}:{pytester.path}"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PATH", path + ":/usr/bin:/bin")
        pytester.runpytest_subprocess("-p", "no:cacheprovider", "--profile").assert_outcomes(
            passed=1
        )
        # (pytest-benchmark, where installed, asks `rev-parse --git-dir` of its own)
        assert not log.exists() or "--show-toplevel" not in log.read_text()
        pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", "--profile", "--profile-save-baseline"
        ).assert_outcomes(passed=1)
    assert "rev-parse --show-toplevel" in log.read_text()


# A plain session: pytest-scalene's options and markers only.
PLAIN = """
import sys

def test_plain(request):
    ours = {n for n in sys.modules if n.startswith("pytest_scalene")}
    built = {"profiling_session", "sampling.profiler", "sampling.cpu_sampler", "gates.judging"}
    # Nor the extension, the in-process hooks (ctypes) or a profiled child's agent.
    built |= {"_native", "sampling.in_process_hooks", "subprocesses.child_agent"}
    assert not {"pytest_scalene." + n for n in built} & ours, sorted(ours)
    assert not request.config.pluginmanager.has_plugin("pytest-scalene-session")
"""

# A marker among plain tests: found after collection, the session profiles from the first test.
MARKED = """
import time

import pytest

@pytest.mark.perf_budget(cpu_s="50 ms")
def test_over_budget():
    end = time.process_time() + 0.4
    while time.process_time() < end:
        pass

def test_profiled_from_the_first_test(request):
    assert request.config.pluginmanager.has_plugin("pytest-scalene-session")
"""


def test_a_plain_session_builds_no_profiler(pytester: pytest.Pytester):
    pytester.makepyfile(test_plain=PLAIN)
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_a_marker_found_at_collection_profiles_the_session(pytester: pytest.Pytester):
    pytester.makepyfile(test_marked=MARKED)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    failed = "FAILED test_marked.py::test_over_budget - CPU time 0.4? s > budget*"
    result.stdout.fnmatch_lines([failed])
    # An option of ours profiles from configure on, here every test
    pytester.makepyfile(test_plain=PLAIN.replace("assert not", "assert"))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--profile", "test_plain.py")
    result.assert_outcomes(passed=1)


# A CPU-only session on a machine without the NVIDIA driver: the GPU is looked for (pynvml is
# installed with the test extras) through _ctypes alone; ctypes' import cost every session 2 ms.
GPU_LOOKED_FOR = """
import sys

def test_first():
    pass

def test_no_ctypes():
    assert "ctypes" not in sys.modules
"""


def test_a_cpu_only_session_looks_for_the_gpu_without_ctypes(pytester: pytest.Pytester):
    if importlib.util.find_spec("pynvml") is None:
        pytest.skip("pynvml is not installed: the GPU is not looked for")
    pytester.makepyfile(test_cpu_only=GPU_LOOKED_FOR)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--profile", "--profile-memory=no", "-p", "no:benchmark"
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*GPU columns absent*"])
