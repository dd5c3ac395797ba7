"""Sparklines of memory timelines: step-function resampling and block characters."""

from __future__ import annotations

from pytest_scalene.reports.sparkline import BLOCKS, resample, sparkline, timeline_sparkline


def test_resample_holds_each_level_until_the_next_sample() -> None:
    timeline = [[0.0, 10.0], [1.0, 50.0], [3.0, 20.0], [4.0, 20.0]]
    assert resample(timeline, 4) == [10.0, 50.0, 50.0, 20.0]


def test_a_short_spike_is_never_averaged_away() -> None:
    timeline = [[0.0, 1.0], [5.0, 900.0], [5.001, 1.0], [10.0, 1.0]]
    values = resample(timeline, 10)
    assert max(values) == 900.0
    assert timeline_sparkline(timeline, 10).count(BLOCKS[-1]) == 1


def test_explicit_span_places_points_in_time() -> None:
    # A line that allocated in the second half of a 2 s test.
    assert resample([[1.0, 8.0]], 4, start=0.0, end=2.0) == [0.0, 0.0, 8.0, 8.0]


def test_sparkline_scale_and_zero() -> None:
    assert sparkline([0, 50, 100]) == BLOCKS[0] + BLOCKS[4] + BLOCKS[7]
    assert sparkline([0, 100], zero=" ") == " " + BLOCKS[-1]
    assert sparkline([25, 50], high=100) == BLOCKS[2] + BLOCKS[4]  # a shared scale


def test_degenerate_timelines() -> None:
    assert timeline_sparkline([], 10) == ""
    assert resample([[2.0, 5.0]], 3) == [5.0, 5.0, 5.0]  # a single point: a flat line
    assert sparkline([0, 0]) == BLOCKS[0] * 2
    assert len(timeline_sparkline([[0, 1], [1, 2]], 40)) == 40
