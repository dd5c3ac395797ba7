"""The real-suite gate benchmark's injections (benchmarks/real_suites_gates.py): each edit keeps
the function's results, lands where the benchmark says (the leak's line, the spin's line), and
the slowdown is there when on and gone when off."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from conftest import load_module

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "real_suites_gates.py"
gates_bench = load_module("real_suites_gates", SCRIPT)

SOURCE = '''
class Parser:
    def parse(self, n):
        """Sum of squares, recursively: the slowdown must apply to the outermost call only."""
        if n == 0:
            return 0
        return n * n + self.parse(n - 1)


def busy(values):
    total = 0
    for v in values:
        total += v
    return total
'''


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _target(function: str, copy: str = "") -> object:
    return gates_bench.Target("pkg.py", function, "pkg", "", "", copy=copy)


@pytest.mark.parametrize("kind", ["leak", "copy", "slow-1.5"])
def test_an_injection_keeps_the_results_and_names_its_line(tmp_path: Path, kind: str) -> None:
    (tmp_path / "pkg.py").write_text(SOURCE)
    target = _target("Parser.parse", copy="n = int(str(n))")
    line = gates_bench.inject(tmp_path, target, kind)
    text = (tmp_path / "pkg.py").read_text().splitlines()[line - 1]
    expected = {"leak": "_pss_leaked.append", "copy": "n = int(str(n))", "slow-1.5": "_pss_i"}
    assert expected[kind] in text and (kind != "leak" or gates_bench.MARK in text)
    module = _load(tmp_path / "pkg.py", f"pkg_{kind.replace('-', '_').replace('.', '_')}")
    assert module.Parser().parse(30) == sum(i * i for i in range(31))
    if kind == "leak":
        assert len(module._pss_leaked) == 31  # every call, recursive ones included


class _Clock:
    """A thread CPU clock that moves by `step` at each read: the spin's sizing, seen without
    the machine's load (the benchmark reads the real factor with timeit: real_factor)."""

    def __init__(self, step: float) -> None:
        self.now, self.step, self.reads = 0.0, step, 0

    def thread_time(self) -> float:
        self.reads += 1
        self.now += self.step
        return self.now


def _slowed(tmp_path: Path, function: str, name: str) -> tuple[object, _Clock, list[float]]:
    (tmp_path / "pkg.py").write_text(SOURCE)
    gates_bench.inject(tmp_path, _target(function), "slow-2.5")
    module = _load(tmp_path / "pkg.py", name)
    clock, asked = _Clock(0.004), []
    module._pss_time = clock
    module._pss_iterations = lambda seconds: asked.append(seconds) or 0
    return module, clock, asked


def test_the_slowdown_spins_its_factor_of_the_call_and_turns_off(tmp_path: Path) -> None:
    module, clock, asked = _slowed(tmp_path, "busy", "pkg_slow")
    assert module.busy([1, 2, 3]) == 6
    assert asked == [pytest.approx(0.004 * 1.5)]  # the call's 4 ms, 1.5 more of it: 2.5x
    module._pss_on[0] = False
    reads = clock.reads
    assert module.busy([1, 2, 3]) == 6
    assert clock.reads == reads and len(asked) == 1  # off: no clock read, no spin


def test_a_recursive_function_spins_once_for_its_outermost_call(tmp_path: Path) -> None:
    module, clock, asked = _slowed(tmp_path, "Parser.parse", "pkg_slow_parse")
    assert module.Parser().parse(5) == 55
    assert clock.reads == 2 and len(asked) == 1  # nested calls neither read nor spin


def test_the_spin_rate_is_calibrated_every_fifth_of_a_second_less_the_clock_reads(
    tmp_path: Path,
) -> None:
    (tmp_path / "pkg.py").write_text(SOURCE)
    gates_bench.inject(tmp_path, _target("busy"), "slow-2.0")
    module = _load(tmp_path / "pkg.py", "pkg_slow_rate")
    clock = _Clock(1e-6)
    module._pss_time = clock
    wall = [10.0]
    clock.perf_counter = lambda: wall[0]  # type: ignore[attr-defined]
    first = module._pss_iterations(0.01)
    rate, read_cost, _ = module._pss_calibration
    # 20,000 iterations between two reads 1 us apart; 100 reads then one more, 101 us
    assert rate == pytest.approx(2e10) and read_cost == pytest.approx(1.01e-6)
    assert first == int((0.01 - 2.02e-6) * 2e10)
    reads = clock.reads
    wall[0] += 0.1
    assert module._pss_iterations(0.01) == first and clock.reads == reads  # not recalibrated
    wall[0] += 0.15
    module._pss_iterations(0.01)
    assert clock.reads == reads + 103
    assert module._pss_iterations(1e-6) == 0  # shorter than the two clock reads: no spin


def test_a_missing_function_is_named(tmp_path: Path) -> None:
    (tmp_path / "pkg.py").write_text(SOURCE)
    with pytest.raises(LookupError, match="Parser.missing"):
        gates_bench.inject(tmp_path, _target("Parser.missing"), "leak")


def test_the_subset_takes_the_hottest_half_then_a_spread() -> None:
    shares = {f"t{i:02}": i / 100 for i in range(40)}
    picked = gates_bench.subset(shares, 10)
    assert len(picked) == 10
    assert {f"t{i:02}" for i in range(35, 40)} <= set(picked)  # the five largest shares
    assert min(picked) < "t10"  # and the rest spread down to the smallest


def test_a_leak_goes_in_its_own_function_when_named(tmp_path: Path) -> None:
    (tmp_path / "pkg.py").write_text(SOURCE)
    target = gates_bench.Target("pkg.py", "Parser.parse", "pkg", "", "", leak_function="busy")
    line = gates_bench.inject(tmp_path, target, "leak")
    module = _load(tmp_path / "pkg.py", "pkg_leak_busy")
    assert module.busy([1, 2]) == 3 and len(module._pss_leaked) == 1
    assert module.Parser().parse(3) == 14 and len(module._pss_leaked) == 1
    assert "def busy" in (tmp_path / "pkg.py").read_text().splitlines()[line - 2]
