"""Real packages' own test suites (scripts/real_suites.py, CI-sized): with --profile (memory on)
and with --profile-memory=no every test has the outcome it has without the plugin, nothing
crashes or hangs, and the JSON holds every test that ran. The sdists come from PyPI through pip;
where they cannot be downloaded the test skips and says so."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from conftest import load_module
from shim_support import needs_shim

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "real_suites.py"
real_suites = load_module("real_suites", SCRIPT)

CACHE = Path(tempfile.gettempdir(), "real-suites", "sdists")  # shared with the script


@needs_shim
@pytest.mark.slow
@pytest.mark.parametrize("name", real_suites.CI_SUITES)
def test_real_suite_outcomes_are_unchanged_by_profiling(name: str, tmp_path: Path) -> None:
    suite = real_suites.SUITES[name]
    if "numpy" in suite.kind:
        pytest.importorskip("numpy")
    try:
        directory = real_suites.fetch(suite, CACHE, tmp_path, timeout_s=60)
    except real_suites.FetchError as exc:
        pytest.skip(f"{name}'s sdist cannot be downloaded here: {exc}")
    runs = [real_suites.run_suite(directory, suite, mode, 180) for mode in real_suites.MODES]
    assert [p for run in runs for p in run.problems] == []
    assert real_suites.differences(runs) == []
    plain, profiled, _ = runs
    assert plain.counts.get("passed", 0) >= 20 and len(plain.outcomes) >= 20, plain.counts
    assert profiled.memory, "--profile measured no memory: the shim was not preloaded"
