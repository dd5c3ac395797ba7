"""Shared by the shim and memory tests: skip where the shim cannot exist, run a profiled suite."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from pytest_scalene.core import runenv

SHIM = runenv.shim_path()
needs_shim = pytest.mark.skipif(
    not sys.platform.startswith("linux") or SHIM is None or not SHIM.is_file(),
    reason="the allocator shim is built on Linux with glibc only",
)
# Skipping hypothesis's plugin saves each subprocess a second of imports.
QUICK = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest")


def run_profiled_suite(
    pytester: pytest.Pytester, name: str, source: str, passed: int
) -> tuple[dict, Path]:
    """Run `source` as test file `name` under `pytest --profile` in a subprocess; check that
    `passed` tests passed; return the JSON profile's tests and the test file's path."""
    path = pytester.makepyfile(**{name: source})
    out = pytester.path / "profile.json"
    result = pytester.runpytest_subprocess(
        "--profile", f"--profile-json={out}", *QUICK, timeout=300
    )
    result.assert_outcomes(passed=passed)
    return json.loads(out.read_text())["tests"], path


def outside_xdist() -> dict[str, str]:
    """This environment without xdist's worker variables: a pytest started from a test run with
    -n would take itself for an xdist worker, which cannot preload the shim."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
