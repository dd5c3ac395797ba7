"""Option values are validated up front with a message that names the option and the value."""

import pytest


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--profile-interval=0"], "expected a positive number, got '0'"),
        (["--profile-interval=abc"], "expected a number, got 'abc'"),
        (["--profile-interval=nan"], "expected a positive number, got 'nan'"),
        (["--profile-clock=gpu"], "invalid choice: 'gpu'"),
        (["--profile-top=0"], "expected a whole number >= 1, got '0'"),
        (["--profile-memory-threshold=ten"], "expected a whole number, got 'ten'"),
        (["--profile-json=."], "--profile-json: expected a file path, got the directory '.'"),
        (["--profile-repeat=0"], "expected a whole number >= 1, got '0'"),
        (["--profile-repeat=0s"], "expected a duration > 0 such as 10s, got '0s'"),
        (["--profile-repeat=infs"], "expected a duration > 0 such as 10s, got 'infs'"),
        (["--profile-repeat=tens"], "expected a number of runs or a duration such as 10s, got"),
    ],
)
def test_bad_option_values_are_usage_errors(pytester, args, message):
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest("--profile", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}*"])


def test_unwritable_json_path_is_one_line_not_a_traceback(pytester):
    pytester.makepyfile("def test_x(): pass")
    pytester.makefile(".txt", notadir="")  # a file where the path wants a folder
    result = pytester.runpytest("--profile", "--profile-memory=no", "--profile-json=notadir.txt/o")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    result.stdout.fnmatch_lines(
        ["pytest-scalene: cannot write --profile-json file notadir.txt/o: *"]
    )
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_without_profile_nothing_is_profiled(pytester):
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest("--profile-json=out.json")
    result.assert_outcomes(passed=1)
    assert "pytest-scalene profile" not in result.stdout.str()


def test_wall_clock_charges_waiting(run_profiled):
    result, profile = run_profiled(
        "import time\ndef test_wait():\n    time.sleep(0.5)\n", "--profile-clock=wall"
    )
    result.assert_outcomes(passed=1)
    assert profile["clock"] == "wall"
    (test,) = profile["tests"].values()
    (line,) = [ln for ln in test["lines"] if ln["line"] == 3]
    assert line["wait_s"] == pytest.approx(0.5, abs=0.1)
    assert line["cpu_python_s"] + line["cpu_native_s"] < 0.1
