"""Fuzzing option values: each argparse type function returns a value within its documented range
or raises argparse.ArgumentTypeError quoting the text it got; through pytest, any value is
accepted or is a usage error naming the option, never a traceback."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_scalene.config.options import (
    Repeat,
    _fraction,
    _interval,
    _non_negative_float,
    _output_file,
    _positive_float,
    _repeat,
    _size_bytes,
    positive_int,
)
from pytest_scalene.core.natural_values import BudgetError
from pytest_scalene.gates.budgets import parse_defaults

# Texts that look like numbers (in every spelling Python accepts or nearly accepts) and others.
numeric_text = st.one_of(
    st.floats().map(repr),
    st.floats().map(str),
    st.integers().map(str),
    st.sampled_from(["1e309", "-0", "0.0", "+1", " 2 ", "1_000", "0x10", "1e-400", "١٢", "∞"]),
    st.sampled_from(["nan", "NaN", "inf", "-inf", "Infinity", "", " ", "9" * 5000]),
)
any_text = st.one_of(numeric_text, st.text(max_size=20))


def _value_or_error(function, text):  # noqa: ANN001, ANN202
    try:
        return function(text)
    except argparse.ArgumentTypeError as exc:
        assert repr(text) in str(exc)  # the message quotes what the user wrote
        return exc


@given(any_text)
def test_positive_float(text):
    value = _value_or_error(_positive_float, text)
    if isinstance(value, Exception):
        return
    assert isinstance(value, float) and math.isfinite(value) and value > 0
    assert value == float(text)


@given(any_text)
def test_non_negative_float(text):
    value = _value_or_error(_non_negative_float, text)
    if isinstance(value, Exception):
        return
    assert isinstance(value, float) and math.isfinite(value) and value >= 0
    assert value == float(text)


@given(st.one_of(any_text, any_text.map(lambda t: t + "%"), any_text.map(lambda t: t + " ms")))
def test_natural_values_are_finite_or_refused_quoting_the_text(text):
    for convert in (_fraction, _interval, _size_bytes):
        value = _value_or_error(convert, text)
        if not isinstance(value, Exception):
            assert math.isfinite(value) and value >= 0
    try:  # --profile-budget's values: the marker's rules, the error naming the whole entry
        limit = parse_defaults([("copy_mb_s", text)]).limits["copy_mb_s"]
    except BudgetError as exc:
        assert str(exc).startswith(f"--profile-budget copy_mb_s={text}: ")
    else:
        assert math.isfinite(limit) and limit >= 0


@given(any_text)
def test_positive_int(text):
    value = _value_or_error(positive_int, text)
    if isinstance(value, Exception):
        return
    assert isinstance(value, int) and value >= 1
    assert value == int(text)


@given(st.floats(min_value=1e-300, max_value=1e300))
def test_every_positive_finite_float_is_accepted_exactly(number):
    assert _positive_float(repr(number)) == number
    assert _non_negative_float(repr(number)) == number


@given(st.integers(min_value=1, max_value=10**100))
def test_every_whole_number_from_one_is_accepted(number):
    assert positive_int(str(number)) == number


@given(st.text(alphabet=st.characters(blacklist_characters="\x00"), max_size=20))
def test_output_file_takes_any_path_but_a_directory(text):
    value = _value_or_error(_output_file, text)
    if isinstance(value, Exception):
        assert text == "" or Path(text).is_dir()
    else:
        assert value == Path(text) and not value.is_dir()


# Through pytest: one usage error naming the option, or a normal run. In-process (no --profile,
# so nothing re-executes or installs signal handlers): about 30 ms an example.
OPTIONS = {
    "--profile-interval": numeric_text,
    "--profile-top": numeric_text,
    "--profile-memory-threshold": numeric_text,
    "--profile-repeat": st.one_of(numeric_text, numeric_text.map(lambda text: text + "s")),
    "--profile-budget": st.one_of(
        numeric_text.map(lambda text: "regression=" + text),
        numeric_text.map(lambda text: "copy_mb_s=" + text),
        st.text(max_size=8),
    ),
    "--profile-clock": st.one_of(st.sampled_from(["cpu", "wall", "CPU", ""]), st.text(max_size=5)),
    "--profile-memory": st.one_of(st.sampled_from(["auto", "yes", "no"]), st.text(max_size=5)),
    "--profile-gpu": st.sampled_from(["auto", "no", "maybe", ""]),
}


@st.composite
def option_and_value(draw):  # noqa: ANN001, ANN201
    option = draw(st.sampled_from(sorted(OPTIONS)))
    # argv cannot hold NUL; surrogates are not valid on a command line either
    text = draw(OPTIONS[option]).replace("\x00", "")
    return option, "".join(c for c in text if not 0xD800 <= ord(c) <= 0xDFFF)


@pytest.mark.slow
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(option_and_value())
def test_any_value_through_pytest_is_accepted_or_a_usage_error(pytester, choice):
    option, text = choice
    pytester.makepyfile(test_one="def test_x(): pass")
    result = pytester.runpytest_inprocess(f"{option}={text}", "--collect-only", "-q")
    if result.ret == pytest.ExitCode.USAGE_ERROR:
        error = result.errlines[-1] if result.errlines else ""
        assert option in "\n".join(result.errlines), error
        assert "Traceback" not in result.stderr.str()
    else:
        assert result.ret == pytest.ExitCode.OK, result.stdout.str()


@given(st.one_of(numeric_text, numeric_text.map(lambda text: text + "s")))
def test_repeat_is_runs_or_a_positive_duration(text):
    value = _value_or_error(_repeat, text)
    if isinstance(value, Exception):
        return
    assert isinstance(value, Repeat) and value.more == (value.runs > 1 or value.seconds > 0)
    if text.strip().endswith("s"):
        assert value.runs == 1 and 0 < value.seconds < float("inf")
    else:
        assert value == Repeat(runs=positive_int(text))
