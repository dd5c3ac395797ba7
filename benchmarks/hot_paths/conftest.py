"""Saving these baselines needs pytest-scalene imported from this source tree.

The code map saved beside them records, for each test, the code it ran: files under the root by
their functions' digests, installed packages by their version alone. Saved from the installed
package, the map names pytest-scalene 0.1.0 and none of its files: a later change to the
plugin moves no digest and no version, so CI's comparison would find these tests unchanged and
never measure them again. docs/baselines.md ("Dogfooding") gives the command.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import pytest_scalene


def pytest_configure(config: pytest.Config) -> None:
    if not config.getoption("--profile-save-baseline", default=False):
        return
    package = Path(pytest_scalene.__file__).resolve().parent
    if package != config.rootpath / "pytest_scalene":  # not .venv's site-packages either
        raise pytest.UsageError(
            f"the hot paths' baselines must be saved with pytest-scalene imported from this "
            f"source tree, not {package}: the code map would record the installed package by "
            f"its version alone, and no later change would re-measure these tests. Run "
            f"PYTHONPATH=. with the built extensions copied into pytest_scalene/ "
            f"(docs/baselines.md, Dogfooding)"
        )
