"""Re-saving keeps a stored test entry whose new figures are within noise (baseline_keep.py)."""

from __future__ import annotations

from pytest_scalene.gates.baseline_keep import within_noise
from pytest_scalene.gates.baseline_store import LineEntry, TestEntry
from pytest_scalene.gates.comparison import NoiseRule

RULE = NoiseRule()


def _entry(cpu: float, peak: float, line_cpu: float, extra_line: float = 0.0) -> TestEntry:
    lines = [LineEntry("t.py", "f", 1, "x = work()", 11, {"cpu_s": line_cpu, "peak_mb": peak})]
    if extra_line:
        lines.append(LineEntry("t.py", "f", 2, "y = more()", 12, {"cpu_s": extra_line}))
    return TestEntry({"cpu_s": cpu, "peak_mb": peak}, tuple(lines), elapsed_s=1.0)


def test_figures_within_noise_keep_the_stored_entry() -> None:
    stored = _entry(1.0, 100.0, 0.9)
    assert within_noise(stored, _entry(1.3, 104.0, 1.1), RULE)  # +30% CPU, +4 MB: noise
    assert within_noise(stored, _entry(0.7, 96.0, 0.7), RULE)
    assert within_noise(stored, _entry(1.0, 100.0, 0.9, extra_line=0.01), RULE)  # a stray sample


def test_real_changes_are_written() -> None:
    stored = _entry(1.0, 100.0, 0.9)
    assert not within_noise(stored, _entry(2.0, 100.0, 1.9), RULE)  # 2x CPU
    assert not within_noise(stored, _entry(0.4, 100.0, 0.35), RULE)  # much faster
    assert not within_noise(stored, _entry(1.0, 150.0, 0.9), RULE)  # +50 MB
    assert not within_noise(stored, _entry(1.0, 100.0, 0.9, extra_line=0.5), RULE)  # a new line
    moved = TestEntry(
        stored.metrics,
        (stored.lines[0].__class__("t.py", "f", 1, "x = work()", 12, stored.lines[0].metrics),),
        1.0,
    )
    assert not within_noise(stored, moved, RULE)  # the line moved: its number is rewritten
    no_memory = TestEntry({"cpu_s": 1.0}, stored.lines, 1.0)
    assert not within_noise(stored, no_memory, RULE)


def test_counts_from_another_environment_are_written_however_close() -> None:
    # The comparison does not judge counts from another environment and says to re-save: the
    # re-save must replace them (before, a new valgrind or a benchmark's counted calls kept the
    # old entry, and every later comparison said "re-save" again).
    stored = TestEntry({"instructions": 1_000_000.0}, (), environment={"valgrind": "3.19"})
    same = TestEntry({"instructions": 1_000_100.0}, (), environment={"valgrind": "3.19"})
    other = TestEntry({"instructions": 1_000_100.0}, (), environment={"valgrind": "3.20"})
    assert within_noise(stored, same, NoiseRule())
    assert not within_noise(stored, other, NoiseRule())


def test_counts_from_a_checkout_elsewhere_within_noise_keep_the_stored_entry() -> None:
    # A save from another clone (another depth) must not rewrite every count that did not move.
    stored = TestEntry({"instructions": 1_000_000.0}, (), environment={"paths": "checkout 2"})
    moved = TestEntry({"instructions": 1_000_100.0}, (), environment={"paths": "checkout 9"})
    assert within_noise(stored, moved, NoiseRule())
