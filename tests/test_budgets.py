"""perf_budget: marker parsing and validation, and the check of every metric on hand-built
profiles (memory, copy, leak and GPU figures under the JSON keys the samplers write)."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_scalene.core.model import LineKey, TestProfile
from pytest_scalene.gates.budgets import (
    Budget,
    BudgetError,
    check,
    parse_defaults,
    parse_marks,
    parse_size,
    parse_value,
)
from pytest_scalene.gates.metrics import METRICS, Availability

WHY = Availability(memory="--profile-memory=no", gpu="--profile-gpu=no")


def mark(*args, **kwargs):
    return pytest.mark.perf_budget(*args, **kwargs).mark


def etl_profile() -> TestProfile:
    """A test with CPU, memory, copy, leak and GPU figures, as the samplers record them."""
    p = TestProfile("tests/test_etl.py::test_load", outcome="passed", elapsed_s=2.0)
    p.cpu_python_s, p.cpu_native_s, p.cpu_system_s = 0.9, 1.2, 0.1
    p.extra.update(
        peak_mb=312.4,
        gpu_peak_mb=900.0,
        leaks=[{"file": "tests/test_etl.py", "line": 50, "probability": 0.99, "rate_mb_s": 12.3}],
    )
    load = p.line(LineKey("tests/test_etl.py", 42, "load_frame"), 40)
    load.cpu_native_s = 1.1
    load.extra.update(
        peak_mb=290.1, alloc_mb=300.0, copy_mb=132.0, copy_mb_s=120.0, gpu_peak_mb=850.0
    )
    loop = p.line(LineKey("tests/test_etl.py", 45, "load_frame"), 40)
    loop.cpu_python_s = 0.8
    loop.extra.update(peak_mb=20.0, alloc_mb=25.0, copy_mb_s=0.0)
    grow = p.line(LineKey("tests/test_etl.py", 50, "cache_rows"), 48)
    grow.cpu_python_s = 0.05
    grow.extra.update(peak_mb=2.0, alloc_mb=30.0, leak_probability=0.99, leak_rate_mb_s=12.3)
    return p


def failures(budget: Budget, profile: TestProfile) -> list[str]:
    return [r.message for r in check(budget, profile, WHY) if not r.passed]


# -- parsing ------------------------------------------------------------------------------------
def test_keywords_and_units():
    budget = parse_marks(
        [
            (
                "t",
                mark(
                    cpu_s=2,
                    python_fraction=0.5,
                    peak_mb="1.5 GB",
                    alloc_mb="512 MiB",
                    copy_mb="1 GB",
                    copy_mb_s="50 MB/s",
                    gpu_peak_mb=100,
                    leaks=False,
                    regression="10%",
                ),
            )
        ]
    )
    assert budget.limits == {
        "cpu_s": 2.0,
        "python_fraction": 0.5,
        "peak_mb": 1536.0,
        "alloc_mb": 512.0,
        "copy_mb": 1024.0,
        "copy_mb_s": 50.0,
        "gpu_peak_mb": 100.0,
        "leaks": False,
    }
    assert budget.regression == pytest.approx(0.10)


@pytest.mark.parametrize(
    ("text", "mb"),
    [("200 MB", 200), ("200MB", 200), ("1.5 GB", 1536), ("512 MiB", 512), ("64 kb", 1 / 16)],
)
def test_sizes(text, mb):
    assert parse_size(text, "peak_mb") == pytest.approx(mb)


@pytest.mark.parametrize(
    ("text", "seconds"), [("2 s", 2.0), ("500 ms", 0.5), ("1.5sec", 1.5), ("0.25", 0.25)]
)
def test_cpu_budget_as_a_duration(text, seconds):
    assert parse_value("cpu_s", text) == pytest.approx(seconds)


def test_closest_mark_wins_per_keyword():
    # iter_markers_with_node order: the function's own mark, then the class's, then the module's
    marks = [
        ("test_x.py::TestA::test_b", mark(cpu_s=1.0)),
        ("test_x.py::TestA", mark(cpu_s=5.0, peak_mb=100)),
        ("test_x.py", mark(peak_mb=999, leaks=False, regression=0.5)),
    ]
    budget = parse_marks(marks)
    assert budget.limits == {"cpu_s": 1.0, "peak_mb": 100.0, "leaks": False}
    assert budget.regression == 0.5


@pytest.mark.parametrize(
    ("kwargs", "args", "expected"),
    [
        ({"peak_mem": 5}, (), "unknown keyword 'peak_mem' (did you mean 'peak_mb'?)"),
        ({"cpu": 5}, (), "unknown keyword 'cpu' (did you mean 'cpu_s'?)"),
        ({"cpu_s": -1}, (), "cpu_s=-1: must not be negative"),
        ({"cpu_s": "fast"}, (), "cpu_s='fast': expected a duration such as '2 s', '500 ms' or a"),
        ({"cpu_s": True}, (), "cpu_s=True: expected a number"),
        ({"cpu_s": math.nan}, (), "cpu_s=nan: expected a finite number"),
        ({"peak_mb": "lots"}, (), "peak_mb='lots': expected a number of MB or a size"),
        ({"peak_mb": "-5 MB"}, (), "peak_mb='-5 MB': must not be negative"),
        ({"peak_mb": "200 MB/s"}, (), "peak_mb='200 MB/s': expected a number of MB"),
        ({"peak_mb": "200"}, (), "peak_mb='200': a size given as text needs a unit"),
        ({"python_fraction": 1.5}, (), "python_fraction=1.5: expected a fraction"),
        ({"leaks": 0}, (), "leaks=0: expected True (leaks allowed) or False"),
        ({"regression": "ten%"}, (), "regression='ten%': expected a fraction"),
        ({}, (200,), "keyword arguments only, got positional 200"),
    ],
)
def test_bad_marker_arguments_name_the_argument(kwargs, args, expected):
    with pytest.raises(BudgetError) as info:
        parse_marks([("tests/test_x.py::test_y", mark(*args, **kwargs))])
    message = str(info.value)
    assert message.startswith("invalid perf_budget marker on tests/test_x.py::test_y: ")
    assert expected in message


def test_an_overridden_bad_value_is_still_an_error():
    marks = [("t::f", mark(cpu_s=1.0)), ("t", mark(cpu_s=-3))]
    with pytest.raises(BudgetError, match=r"invalid perf_budget marker on t: cpu_s=-3"):
        parse_marks(marks)


@given(st.one_of(st.text(max_size=20), st.floats(allow_nan=True), st.integers(), st.none()))
def test_parse_value_accepts_or_raises_budget_error(value):
    for name in (
        "cpu_s",
        "peak_mb",
        "copy_mb",
        "copy_mb_s",
        "python_fraction",
        "leaks",
        "regression",
    ):
        try:
            parsed = parse_value(name, value)
        except BudgetError:
            continue
        if name == "leaks":
            assert isinstance(parsed, bool)
        else:
            assert parsed >= 0 and math.isfinite(parsed)


# -- checking -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({"cpu_s": 2.0}, "CPU time 2.20 s > budget 2 s (tests/test_etl.py:42 load_frame: 1.10 s)"),
        (
            {"python_fraction": 0.3},
            "Python share of CPU time 0.41 > budget 0.3 "
            "(tests/test_etl.py:45 load_frame: 0.80 s in Python)",
        ),
        (
            {"peak_mb": 200},
            "peak memory 312.4 MB > budget 200 MB (tests/test_etl.py:42 load_frame: 290.1 MB)",
        ),
        (
            {"alloc_mb": 100},
            "memory allocated 355.0 MB > budget 100 MB (tests/test_etl.py:42 load_frame: 300.0 MB)",
        ),
        (
            {"copy_mb": 100},
            "copy volume 132.0 MB > budget 100 MB (tests/test_etl.py:42 load_frame: 132.0 MB)",
        ),
        (
            {"gpu_peak_mb": 512},
            "GPU peak memory 900.0 MB > budget 512 MB (tests/test_etl.py:42 load_frame: 850.0 MB)",
        ),
        (
            {"leaks": False},
            "1 leak detected, budget leaks=False "
            "(tests/test_etl.py:50 cache_rows: probability 0.99, 12.3 MB/s)",
        ),
    ],
)
def test_each_metric_fails_with_metric_limit_value_and_line(limits, message):
    assert failures(Budget(limits), etl_profile()) == [message]


def test_copy_rate_is_the_mb_copied_over_the_test_time():
    # load_frame:42 copies 120 MB/s over its 1.1 s of CPU: 132 MB in a 2 s test = 66 MB/s
    [message] = failures(Budget({"copy_mb_s": 50}), etl_profile())
    assert message == (
        "copy rate 66.0 MB/s > budget 50 MB/s (tests/test_etl.py:42 load_frame: 120.0 MB/s)"
    )
    profile = etl_profile()
    profile.extra["copy_mb_s"] = 10.0  # a test-level rate, when the sampler writes one, wins
    assert failures(Budget({"copy_mb_s": 50}), profile) == []


@pytest.mark.parametrize("elapsed_s", [0.1, 2.0, 20.0])
def test_copy_volume_budgets_judge_the_mb_copied_whatever_the_time(elapsed_s):
    profile = etl_profile()
    profile.elapsed_s = elapsed_s  # a warm run, or a busy machine: the same bytes copied
    [result] = check(Budget({"copy_mb": 150}), profile, WHY)
    assert (result.passed, result.value) == (True, 132.0)
    profile.extra["copy_mb"] = 160.0  # the test's own count, when the sampler writes one, wins
    assert failures(Budget({"copy_mb": 150}), profile) == [
        "copy volume 160.0 MB > budget 150 MB (tests/test_etl.py:42 load_frame: 132.0 MB)"
    ]


def test_limits_met_pass_with_a_message():
    results = check(Budget({"cpu_s": 3.0, "peak_mb": 400.0}), etl_profile(), WHY)
    assert [(r.metric, r.passed, r.message) for r in results] == [
        ("cpu_s", True, "CPU time 2.20 s <= budget 3 s"),
        ("peak_mb", True, "peak memory 312.4 MB <= budget 400 MB"),
    ]


def test_leaks_allowed_needs_no_memory_figures():
    profile = TestProfile("t::f", cpu_python_s=1.0)
    assert check(Budget({"leaks": True}), profile, WHY) == []


@pytest.mark.parametrize("name", [n for n in METRICS if METRICS[n].source != "cpu"])
def test_unmeasured_metric_fails_saying_why(name):
    profile = TestProfile("t::f", cpu_python_s=1.0)  # CPU only: no memory, no GPU figures
    limit = False if name == "leaks" else 1.0
    [result] = check(Budget({name: limit}), profile, WHY)
    assert not result.passed and result.value is None
    source = {
        "gpu_peak_mb": "GPU profiling is off (--profile-gpu=no)",
        "instructions": "no instruction count (the test was not counted)",
    }.get(name, "memory profiling is off (--profile-memory=no)")
    assert result.message == f"{name} budget cannot be checked: {source}"


def test_cpu_budget_when_sampling_was_skipped_fails_saying_why():
    profile = TestProfile("t::f")
    profile.extra["cpu_sampling_skipped"] = "SIGPROF is already in use"
    [result] = check(Budget({"cpu_s": 1.0}), profile, WHY)
    assert result.message == (
        "cpu_s budget cannot be checked: CPU sampling was skipped for this test "
        "(SIGPROF is already in use)"
    )


def test_command_line_gates_apply_unless_the_marker_sets_its_own():
    defaults = parse_defaults([("leaks", "false"), ("copy_mb_s", "50 MB/s"), ("cpu_s", "2")])
    assert Budget().with_defaults(defaults).limits == {
        "leaks": False,
        "copy_mb_s": 50.0,
        "cpu_s": 2.0,
    }
    own = Budget({"leaks": True, "copy_mb_s": 500.0}).with_defaults(defaults)
    assert own.limits == {"leaks": True, "copy_mb_s": 500.0, "cpu_s": 2.0}


@pytest.mark.parametrize(
    ("entry", "limit"),
    [
        (("leaks", "FALSE"), False),
        (("leaks", "yes"), True),
        (("cpu_s", "500 ms"), 0.5),
        (("peak_mb", "1 GB"), 1024.0),
        (("instructions", "25M"), 25e6),
        (("python_fraction", "0.5"), 0.5),
    ],
)
def test_command_line_budget_values_read_as_the_marker_reads_them(entry, limit):
    assert parse_defaults([entry]).limits[entry[0]] == pytest.approx(limit)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (("lekas", "false"), "--profile-budget lekas=false: unknown keyword 'lekas' (did you mean"),
        (("leaks", "maybe"), "--profile-budget leaks=maybe: leaks='maybe': expected True"),
        (("python_fraction", "2"), "--profile-budget python_fraction=2: "),
    ],
)
def test_a_wrong_command_line_budget_names_the_entry(entry, message):
    with pytest.raises(BudgetError, match=re.escape(message)):
        parse_defaults([entry])
