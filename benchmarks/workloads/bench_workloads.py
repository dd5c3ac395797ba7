"""Each workload wrapped in a test, so that every tool is measured around a whole pytest run.

BENCH_SCALE sets the size: 1.0 is the full run (2-10 s each), --quick uses a fraction.
"""

import os

import wl_alloc
import wl_copy
import wl_julia
import wl_mdp
import wl_numpy
import wl_raytrace
import wl_threads

SCALE = float(os.environ.get("BENCH_SCALE", "1"))


def test_julia():
    assert wl_julia.run(SCALE) > 0


def test_raytrace():
    assert wl_raytrace.run(SCALE) > 0


def test_mdp():
    assert wl_mdp.run(SCALE) > 0


def test_alloc():
    assert wl_alloc.run(SCALE) > 0


def test_numpy():
    assert wl_numpy.run(SCALE) > 0


def test_copy():
    assert wl_copy.run(SCALE) > 0


def test_threads():
    assert wl_threads.run(SCALE) > 0
