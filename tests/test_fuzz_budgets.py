"""Fuzzing the perf_budget marker: any keywords and values a test author can write either give a
Budget that holds only valid limits (the closest mark winning) or a BudgetError naming the mark
and the argument; never another exception. Checking a budget against any profile is consistent
with the limit and the measured value."""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_scalene.core.model import LineKey, TestProfile
from pytest_scalene.core.natural_values import _SIZE_UNITS, BudgetError, parse_size
from pytest_scalene.gates.budgets import (
    KEYWORDS,
    MARKER,
    Budget,
    check,
    parse_marks,
    parse_value,
)
from pytest_scalene.gates.metrics import METRICS, Availability

WHY = Availability(memory="--profile-memory=no", gpu="--profile-gpu=no")
SIZE_METRICS = [name for name, m in METRICS.items() if m.size]

numbers = st.one_of(
    st.integers(),
    st.sampled_from([10**400, -(10**400), 2**1024]),  # beyond float's range
    st.floats(),
    st.decimals(allow_nan=True),
    st.fractions(),
    st.builds(np.float64, st.floats()),
    st.builds(np.int64, st.integers(-(2**63), 2**63 - 1)),
)
number_text = st.one_of(
    st.floats().map(repr),
    st.integers().map(str),
    st.sampled_from(["1e308", "1e309", "-0", ".5", "5.", "1e-400", "nan", "inf", "0x10"]),
)
units = st.one_of(st.sampled_from(sorted(_SIZE_UNITS)), st.text(max_size=4))
size_text = st.builds(
    lambda n, space, unit, upper, rate: f"{n}{space}{unit.upper() if upper else unit}{rate}",
    number_text,
    st.sampled_from(["", " ", "  "]),
    units,
    st.booleans(),
    st.sampled_from(["", "/s", " / s", "/h"]),
)
values = st.one_of(
    st.none(),
    st.booleans(),
    numbers,
    st.text(max_size=12),
    size_text,
    number_text.map(lambda t: t + "%"),
    st.binary(max_size=4),
    st.lists(st.integers(), max_size=2),
    st.tuples(st.floats()),
    st.complex_numbers(),
)
names = st.one_of(st.sampled_from(KEYWORDS), st.text(max_size=10))
marks = st.lists(
    st.tuples(
        st.sampled_from(["mod.py", "mod.py::C", "mod.py::C::test_f"]),
        st.lists(values, max_size=1).map(tuple),  # positional arguments (always an error)
        st.dictionaries(names, values, max_size=4),
    ),
    max_size=3,
)


def _parsed_or_error(name: str, value: object) -> float | bool | BudgetError:
    try:
        return parse_value(name, value)
    except BudgetError as exc:
        return exc


@given(names, values)
def test_parse_value_gives_a_valid_limit_or_a_budget_error_naming_it(name, value):
    try:
        parsed = parse_value(name, value)
    except BudgetError as exc:
        assert str(exc).startswith(f"{name}={value!r}: ")
        return
    if name == "leaks":
        assert isinstance(parsed, bool) and parsed is value
        return
    assert isinstance(parsed, float) and math.isfinite(parsed) and parsed >= 0
    if name == "python_fraction":
        assert parsed <= 1
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        assert parsed == float(value)  # a plain number is taken as it is, in the metric's unit


@given(st.sampled_from(SIZE_METRICS), st.floats(0, 1e12), st.sampled_from(sorted(_SIZE_UNITS)))
def test_sizes_convert_to_mb(name, number, unit):
    rate = "/s" if METRICS[name].unit == "MB/s" else ""
    parsed = parse_value(name, f"{number!r} {unit.upper()}{rate}")
    assert parsed == pytest.approx(number * _SIZE_UNITS[unit], rel=1e-12)


@given(size_text, st.booleans())
def test_parse_size_is_finite_or_a_budget_error(text, rate):
    try:
        mb = parse_size(text, "peak_mb", rate=rate)
    except BudgetError as exc:
        assert str(exc).startswith("peak_mb: ")
        return
    assert math.isfinite(mb) and mb >= 0


@given(marks)
def test_parse_marks_closest_wins_or_names_the_first_bad_mark(raw):
    given_marks = [(origin, pytest.mark.perf_budget(*args, **kw).mark) for origin, args, kw in raw]
    # The oracle: the first mark (closest first) with a positional argument, an unknown keyword
    # or a bad value is the one the error names; otherwise the closest value of each keyword.
    bad = None
    expected: dict[str, float | bool] = {}
    for origin, args, kwargs in raw:
        problems = [
            n
            for n, v in kwargs.items()
            if n not in KEYWORDS or isinstance(_parsed_or_error(n, v), Exception)
        ]
        if args or problems:
            bad = (origin, args, problems)
            break
        for name, value in kwargs.items():
            expected.setdefault(name, parse_value(name, value))
    try:
        budget = parse_marks(given_marks)
    except BudgetError as exc:
        assert bad is not None
        origin, args, problems = bad
        message = str(exc)
        assert message.startswith(f"invalid {MARKER} marker on {origin}: ")
        if args:
            assert "keyword arguments only" in message
        else:
            first = problems[0]
            named = f"unknown keyword {first!r}" if first not in KEYWORDS else f"{first}="
            assert named in message
        return
    assert bad is None
    assert set(budget.limits) <= set(METRICS)
    assert budget.limits == {n: v for n, v in expected.items() if n != "regression"}
    assert budget.regression == expected.get("regression")


metric_values = st.floats(0, 1e6)
limits = st.dictionaries(
    st.sampled_from(list(METRICS)),
    st.floats(0, 1e6),
    max_size=len(METRICS),
).map(lambda d: {k: (bool(v % 2 < 1) if k == "leaks" else v) for k, v in d.items()})


@st.composite
def profiles(draw) -> TestProfile:
    profile = TestProfile("t.py::test_x", elapsed_s=draw(metric_values))
    profile.cpu_python_s, profile.cpu_native_s, profile.cpu_system_s = (
        draw(metric_values) for _ in range(3)
    )
    memory = draw(st.booleans())
    if memory:
        profile.extra["peak_mb"] = draw(metric_values)
        leak = st.fixed_dictionaries({"file": st.just("t.py"), "line": st.integers(1, 9)})
        profile.extra["leaks"] = draw(st.lists(leak, max_size=2))
    if draw(st.booleans()):
        profile.extra["gpu_peak_mb"] = draw(metric_values)
    for line in range(draw(st.integers(0, 3))):
        stats = profile.line(LineKey("t.py", line + 1, "f"), 1)
        stats.cpu_python_s = draw(metric_values)
        if memory:
            stats.extra.update(alloc_mb=draw(metric_values), copy_mb_s=draw(metric_values))
    return profile


@given(limits, profiles())
def test_check_passes_exactly_the_limits_that_are_met(limit_map, profile):
    results = check(Budget(limit_map), profile, WHY)
    judged = [n for n in METRICS if n in limit_map and limit_map[n] is not True]
    assert [r.metric for r in results] == judged  # one result per limit, in table order
    for result in results:
        value = METRICS[result.metric].of_test(profile)
        assert result.value == (None if value is None else result.value)
        if value is None:
            assert not result.passed and "cannot be checked" in result.message
        elif result.metric == "leaks":
            assert result.passed == (len(profile.extra["leaks"]) == 0)
        else:
            assert result.passed == (value <= limit_map[result.metric])
            assert result.value == value


def test_known_edge_values():
    # Found by the properties above: each was an OverflowError or an infinite limit.
    for value in (10**400, "1e308 TB", "1e400 MB"):
        with pytest.raises(BudgetError, match="finite"):
            parse_value("peak_mb", value)
    # Numbers are Python's int and float (numpy's floats are floats); other number types are
    # named in the error rather than converted with a possible loss.
    for value in (Decimal("1.5"), Fraction(1, 2), np.int64(3)):
        with pytest.raises(BudgetError, match="expected a number"):
            parse_value("cpu_s", value)
    assert parse_value("cpu_s", np.float64(1.5)) == 1.5
