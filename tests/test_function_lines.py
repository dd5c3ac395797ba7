"""Where an instruction-count message points for each counted function (baseline_entry):
its hottest sampled line, else its def line (a genexpr's: its enclosing function's)."""

from __future__ import annotations

import os
from pathlib import Path

from pytest_scalene.core.model import LineKey, LineStats, TestProfile
from pytest_scalene.gates.baseline_entry import _function_lines

SOURCE = """\
class Parser:
    def parse(self, text):
        return sum(len(t) for t in text.split())


def helper():
    return 1
"""


def test_hottest_line_else_def_line_else_the_enclosing_def(tmp_path: Path) -> None:
    (tmp_path / "mod.py").write_text(SOURCE)
    profile = TestProfile("t")
    for line, cpu_s in ((6, 0.0), (7, 0.02), (7, 0.0)):
        key = LineKey("mod.py", line, "helper")
        profile.lines.setdefault(key, LineStats(function_line=6, cpu_python_s=cpu_s))
    names = [
        "mod.py::helper",
        "mod.py::Parser.parse",
        "mod.py::Parser.parse.<locals>.<genexpr>",
        "mod.py::gone",
    ]
    assert _function_lines(profile, str(tmp_path), names) == {
        "mod.py::helper": "mod.py:7 helper",  # sampled: its hottest line
        "mod.py::Parser.parse": "mod.py:2 Parser.parse",
        "mod.py::Parser.parse.<locals>.<genexpr>": "mod.py:2 Parser.parse.<locals>.<genexpr>",
        "mod.py::gone": "mod.py gone",
    }
    # An edited file is read again (its def lines are cached while it is unchanged).
    (tmp_path / "mod.py").write_text("\n\n" + SOURCE)
    stat = (tmp_path / "mod.py").stat()
    os.utime(tmp_path / "mod.py", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    moved = _function_lines(profile, str(tmp_path), ["mod.py::Parser.parse"])
    assert moved == {"mod.py::Parser.parse": "mod.py:4 Parser.parse"}
