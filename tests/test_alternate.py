"""benchmarks/alternate.py: commands run in alternation, one at a time, each one's CPU time
its own."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import load_module

alternate = load_module(
    "alternate", Path(__file__).resolve().parents[1] / "benchmarks" / "alternate.py"
)

# Spins for `cpu` CPU seconds, writing a wall-clock stamp each millisecond of its run.
SPIN = """
import sys, time
out, cpu = open(sys.argv[1], "w"), float(sys.argv[2])
start = last = time.process_time()
while time.process_time() - start < cpu:
    if time.process_time() - last >= 0.001:
        last = time.process_time()
        out.write(f"{time.monotonic()}\\n")
"""


def test_each_command_gets_its_own_cpu_time_in_turns(tmp_path):
    stamps = [tmp_path / "a", tmp_path / "b"]
    commands = [
        [sys.executable, "-c", SPIN, str(stamps[0]), "0.3"],
        [sys.executable, "-c", "import time; time.sleep(0.3)"],  # wall time, next to no CPU
        [sys.executable, "-c", SPIN, str(stamps[1]), "0.3"],
    ]
    spun, slept, spun_too = alternate.cpu_times(commands, tmp_path)
    assert spun >= 0.3 and spun_too >= 0.3
    assert slept < 0.15  # the interpreter's start-up alone
    # One at a time, in slices: the two spinners' stamps change hands some tens of times (each
    # needs 15 slices of 20 ms at full speed, more on a starved machine), where side by side on
    # two cores they would interleave at nearly every millisecond (hundreds of changes), and
    # run one after the other they would change hands once.
    owners = sorted(
        (float(line), i) for i, f in enumerate(stamps) for line in f.read_text().split()
    )
    changes = sum(1 for (_, a), (_, b) in zip(owners, owners[1:], strict=False) if a != b)
    assert 4 <= changes <= 150, changes


def test_a_failing_command_is_named_and_the_others_are_stopped(tmp_path):
    commands = [
        [sys.executable, "-c", "import time; time.sleep(30)"],
        [sys.executable, "-c", "raise SystemExit(3)"],
    ]
    with pytest.raises(RuntimeError, match="SystemExit"):
        alternate.cpu_times(commands, tmp_path)
