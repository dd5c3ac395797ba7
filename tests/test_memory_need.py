"""Plain `pytest` preloads the allocator shim only when the test files set a memory budget
(memory_need.py): memory budgets work without --profile, and a suite without them pays nothing."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest
from shim_support import needs_shim, outside_xdist

from pytest_scalene.core import runenv
from pytest_scalene.gates.memory_need import paths_need_memory, text_needs_memory

REPORT_SHIM = """
import pytest
from pytest_scalene.core import runenv

{marker}
def test_shim():
    print("SHIM", runenv.shim_loaded())
"""


@pytest.mark.parametrize(
    ("text", "needed"),
    [
        ("@pytest.mark.perf_budget(peak_mb=200)", True),
        ("@pytest.mark.perf_budget(cpu_s=1, alloc_mb='1 GB')", True),
        ("pytestmark = pytest.mark.perf_budget(copy_mb_s=50)", True),
        ("@pytest.mark.perf_budget(leaks=False)", True),
        ("@pytest.mark.perf_budget(leaks=True)", False),  # leaks allowed: nothing to measure
        ("@pytest.mark.perf_budget(cpu_s=2)", False),
        ("peak_mb = 3  # no marker in this file", False),
    ],
)
def test_which_texts_need_memory(text: str, needed: bool) -> None:
    assert text_needs_memory(text) is needed


def test_only_test_files_and_conftests_are_read(tmp_path: Path) -> None:
    (tmp_path / "helpers.py").write_text("@pytest.mark.perf_budget(peak_mb=1)\n")
    (tmp_path / "test_a.py").write_text("def test_a(): pass\n")
    assert not paths_need_memory([tmp_path], ["test_*.py"])
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "conftest.py").write_text("pytestmark = perf_budget(alloc_mb=5)\n")
    assert paths_need_memory([tmp_path], ["test_*.py"])


def _shim_in_plain_run(directory: Path, marker: str, *options: str) -> str:
    (directory / "test_shim.py").write_text(REPORT_SHIM.format(marker=marker))
    command = [sys.executable, "-m", "pytest", "-s", "-q", "-p", "no:cacheprovider", *options]
    done = subprocess.run(
        command, cwd=directory, env=outside_xdist(), capture_output=True, text=True
    )
    assert "1 passed" in done.stdout, done.stdout + done.stderr
    return next(ln for ln in done.stdout.splitlines() if ln.startswith("SHIM"))


@needs_shim
def test_plain_pytest_preloads_only_for_memory_budgets(tmp_path: Path) -> None:
    assert _shim_in_plain_run(tmp_path, "@pytest.mark.perf_budget(peak_mb=100)") == "SHIM True"
    assert _shim_in_plain_run(tmp_path, "@pytest.mark.perf_budget(cpu_s=5)") == "SHIM False"
    assert _shim_in_plain_run(tmp_path, "") == "SHIM False"


def test_every_option_that_profiles_every_test_wants_memory() -> None:
    # One list decides both (they were two, and disagreed: memory was missing under
    # --profile-compare-history and --profile-compare-ref, "the shim is not preloaded").
    for name in runenv.PROFILE_EVERY_TEST + runenv.BUDGET_OPTIONS:
        assert runenv.profiling_requested(argparse.Namespace(**{name: True})), name
    assert not runenv.profiling_requested(argparse.Namespace(profile_json="x.json"))


@needs_shim
def test_the_history_gate_profiles_memory(tmp_path: Path) -> None:
    store = f"--profile-history={tmp_path / 'history.sqlite'}"
    shim = _shim_in_plain_run(tmp_path, "", store, "--profile-compare-history")
    assert shim == "SHIM True"
