"""The terminal report of a real run on the example suite fits 100 columns."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pytest_scalene.reports.terminal_report import display_width

EXAMPLES = Path(__file__).parent.parent / "examples"


@pytest.mark.slow
def test_example_suite_report_fits_100_columns(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    for source in EXAMPLES.glob("test_*.py"):
        shutil.copy(source, pytester.path / source.name)
    monkeypatch.setenv("COLUMNS", "100")  # pytest's own separators at 100 too
    result = pytester.runpytest_subprocess("--profile", "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str()
    lines = result.stdout.lines
    start = next(i for i, ln in enumerate(lines) if "pytest-scalene profile" in ln)
    end = next(i for i in range(len(lines) - 1, start, -1) if lines[i].startswith("====="))
    report = lines[start + 1 : end]
    assert any("test_example.py::test_python_and_native" in ln for ln in report)
    assert any("matrix = matrix @ matrix / 1500.0" in ln for ln in report)  # with its source
    too_wide = [ln for ln in report if display_width(ln) > 100]
    assert not too_wide, "\n".join(too_wide)
