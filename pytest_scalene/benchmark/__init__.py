"""Tests written with pytest-benchmark's `benchmark` fixture, measured per call of the
benchmarked function (docs/pytest-benchmark.md): the calls counted and the profile divided by
them (calls.py), and a compatible fixture where no plugin provides one (benchmark_fixture.py)."""
