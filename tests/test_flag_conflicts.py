"""pytest-profiling also owns --profile: both installed must give a clear error, not argparse's."""

from types import SimpleNamespace

import pytest

RIVAL = """
def pytest_addoption(parser):
    parser.getgroup("Profiling").addoption("--profile", action="store_true")
"""


def test_rival_profile_flag_gives_a_clear_usage_error(pytester):
    pytester.makepyfile(rival_plugin=RIVAL)
    pytester.makepyfile("def test_x(): pass")
    pytester.syspathinsert()
    result = pytester.runpytest_subprocess("-p", "rival_plugin")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*pytest-scalene and another plugin both define --profile*"])
    result.stderr.fnmatch_lines(["*-p no:scalene*"])
    assert "Traceback" not in result.stderr.str()


def test_disabling_scalene_lets_the_rival_run(pytester):
    pytester.makepyfile(rival_plugin=RIVAL)
    pytester.makepyfile("def test_x(): pass")
    pytester.syspathinsert()
    result = pytester.runpytest_subprocess("-p", "rival_plugin", "-p", "no:scalene", "--profile")
    result.assert_outcomes(passed=1)


def test_installed_pytest_profiling_is_named(monkeypatch):
    from importlib.metadata import PackageNotFoundError

    from pytest_scalene.config import option_errors

    def distribution(name):  # pytest-profiling installed, and nothing else looked up
        if name != "pytest-profiling":
            raise PackageNotFoundError(name)
        return object()

    monkeypatch.setattr(option_errors, "distribution", distribution)

    class Manager:
        def is_blocked(self, name):
            return False

    parser = SimpleNamespace(_anonymous=SimpleNamespace(options=[]), _groups=[])
    with pytest.raises(pytest.UsageError, match="pytest-profiling both define --profile"):
        option_errors.check_flag_owner(parser, Manager())
