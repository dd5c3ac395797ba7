"""A perf_budget marker is found wherever pytest lets one be put: on the function, its class,
its module (pytestmark), a parameter (pytest.param's marks), added by a conftest at collection
or by a fixture as the test sets up. The plugin first looks the name up in the test's keywords
(runenv.has_marker, a few dict reads) before walking its markers: a placement that lookup
missed would leave that test's budget unjudged, i.e. passing silently. Each marker here is
malformed, which fails its test before it runs, so each test fails only if its marker was found,
in a session that profiles every test and in one that profiles the budgeted tests alone."""

from __future__ import annotations

import pytest

SUITE = """
import pytest

BAD = pytest.mark.perf_budget(no_such_figure=1)


@BAD
def test_function():
    pass


@BAD
class TestClass:
    def test_method(self):
        pass


@pytest.mark.parametrize("n", [1, pytest.param(2, marks=BAD)])
def test_param(n):
    pass


def test_added_by_conftest():
    pass


@pytest.fixture
def budgeted(request):
    request.node.add_marker(BAD)


def test_added_by_fixture(budgeted):
    pass


def test_plain():
    pass
"""

MODULE_MARKED = """
import pytest

pytestmark = pytest.mark.perf_budget(no_such_figure=1)


def test_in_marked_module():
    pass
"""

CONFTEST = """
import pytest


def pytest_collection_modifyitems(items):
    for item in items:
        if item.name == "test_added_by_conftest":
            item.add_marker(pytest.mark.perf_budget(no_such_figure=1))
"""

FAILED = [
    "test_placed.py::test_function",
    "test_placed.py::TestClass::test_method",
    "test_placed.py::test_param[2]",
    "test_placed.py::test_added_by_conftest",
    "test_placed.py::test_added_by_fixture",
    "test_module_marked.py::test_in_marked_module",
]


@pytest.mark.parametrize("options", [["--profile"], []], ids=["profile", "markers-only"])
def test_a_marker_is_found_wherever_it_is_placed(pytester, options):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_placed=SUITE, test_module_marked=MODULE_MARKED)
    result = pytester.runpytest_subprocess(
        "-q", "-p", "no:cacheprovider", "-rf", "--profile-memory=no", *options
    )
    result.assert_outcomes(passed=2, failed=len(FAILED))
    failed = {
        line.split(" - ")[0].removeprefix("FAILED ")
        for line in result.outlines
        if line.startswith("FAILED ") and "invalid perf_bu" in line
    }
    assert failed == set(FAILED)


LATE_ONLY = """
import pytest


@pytest.fixture
def budgeted(request):
    request.node.add_marker(pytest.mark.perf_budget(peak_mb=1))


def test_late(budgeted):
    assert len(bytearray(8 << 20))


def test_plain():
    pass
"""


def test_a_marker_added_only_while_tests_run_fails_the_run_as_not_judged(pytester):
    # No marker at collection and no option of ours: the session does not profile, so the
    # budget a fixture adds cannot be judged, and the run says so instead of passing.
    pytester.makepyfile(test_late=LATE_ONLY)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    assert result.ret == 7
    result.stdout.fnmatch_lines(
        ["*pytest-scalene: not judged*", "1 test(s) got a perf_budget marker*", "*test_late*"]
    )
    # With an option of ours the session profiles, and the late budget is judged (and fails).
    profiled = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", "--profile-memory=yes")
    profiled.assert_outcomes(passed=1, failed=1)
    profiled.stdout.fnmatch_lines(["*budget FAIL: peak memory*"])
    # Without the late marker nothing is said and nothing changes.
    pytester.makepyfile(test_late="def test_plain():\n    pass\n")
    plain = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    assert plain.ret == 0 and "not judged" not in plain.stdout.str()


def test_the_suite_wide_scan_finds_each_placement_and_only_those(pytester):
    # runenv.marked decides at collection whether a session without options of ours profiles
    # at all, which tests an instruction budget counts, and at the session's end which markers
    # came too late: each placement must be found alone, with its parents read once.
    from pytest_scalene.core import runenv

    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_placed=SUITE, test_module_marked=MODULE_MARKED)
    finished = pytester.inline_run("--collect-only").getcalls("pytest_collection_finish")
    items = finished[0].session.items  # after the conftest's collection hook
    found = {item.nodeid for item in runenv.marked(items)}
    assert found == set(FAILED) - {"test_placed.py::test_added_by_fixture"}
    late = next(item for item in items if item.name == "test_plain")
    late.add_marker("perf_budget")  # as a fixture does while the test runs
    assert late in runenv.marked(items)
