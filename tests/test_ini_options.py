"""Every --profile-* option is also an ini key (ini_options.py); the command line wins; a bad ini
value is a usage error that names the key and the accepted form."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from shim_support import outside_xdist

from pytest_scalene.config import options
from pytest_scalene.config.option_errors import REMOVED, ini_key

SHOW = """
def test_show(request):
    for dest in {dests!r}:
        print("OPTION", dest, repr(getattr(request.config.option, dest)))
"""

# ini key: (ini value, the option's value as repr); all set in one pytest.ini
INI = {
    "profile": ("true", "True"),
    "profile_interval": ("5 ms", "0.005"),
    "profile_clock": ("wall", "'wall'"),
    "profile_include": ("lib/*.py 'my dir/*'", "['lib/*.py', 'my dir/*']"),
    "profile_exclude": ("vendor/*", "['vendor/*']"),
    "profile_json": ("perf/p.json", "PosixPath('perf/p.json')"),
    "profile_html": ("perf/p.html", "PosixPath('perf/p.html')"),
    "profile_speedscope": ("s.json", "PosixPath('s.json')"),
    "profile_top": ("3", "3"),
    "profile_memory": ("auto", "'auto'"),
    "profile_memory_threshold": ("1 MB", "1048576"),
    "profile_gpu": ("no", "'no'"),
    "profile_subprocesses": ("true", "True"),
    "profile_save_baseline": ("true", "True"),
    "profile_compare": ("false", "False"),
    "profile_baseline_dir": ("perf/base", "'perf/base'"),
    "profile_repeat": ("0.05s", "Repeat(runs=1, seconds=0.05)"),
    "profile_measure": ("time", "'time'"),
    "profile_select": ("all", "'all'"),
    "profile_compare_ref": ("HEAD", "'HEAD'"),  # the directory is made a git repository
    "profile_allow_unjudged": ("true", "True"),
    "profile_allow_ungated_cpu": ("true", "True"),
    "profile_markdown": ("summary.md", "PosixPath('summary.md')"),
    "profile_budget": ("leaks=false 'copy_mb_s=1 GB/s'", "['leaks=false', 'copy_mb_s=1 GB/s']"),
    "profile_history": ("perf/history.db", "'perf/history.db'"),
    "profile_compare_history": ("false", "False"),
    "profile_history_window": ("7", "7"),
}
# the command line wins over the ini keys above
CLI = {
    "profile_interval": ("--profile-interval=0.02", "0.02"),
    "profile_clock": ("--profile-clock=cpu", "'cpu'"),
    "profile_exclude": ("--profile-exclude=x/*", "['x/*']"),
    "profile_json": ("--profile-json=q.json", "PosixPath('q.json')"),
    "profile_top": ("--profile-top=7", "7"),
    "profile_memory_threshold": ("--profile-memory-threshold=4096", "4096"),
    "profile_baseline_dir": ("--profile-baseline-dir=b", "'b'"),
    "profile_repeat": ("--profile-repeat=2", "Repeat(runs=2, seconds=0.0)"),
    "profile_budget": ("--profile-budget=regression=0.5", "['regression=0.5']"),
    "profile_history_window": ("--profile-history-window=9", "9"),
}


def _options(directory: Path, *args: str) -> dict[str, str]:
    directory.joinpath("test_show.py").write_text(SHOW.format(dests=sorted(INI)))
    ini = "".join(f"{dest} = {value}\n" for dest, (value, _) in INI.items())
    directory.joinpath("pytest.ini").write_text("[pytest]\n" + ini)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], cwd=directory, check=True)
    subprocess.run([*git, "add", "-A"], cwd=directory, check=True)
    subprocess.run([*git, "commit", "-qm", "profile_compare_ref"], cwd=directory, check=True)
    command = [sys.executable, "-m", "pytest", "-s", "-p", "no:cacheprovider", *args]
    done = subprocess.run(
        command, cwd=directory, env=outside_xdist(), capture_output=True, text=True
    )
    found = dict(re.findall(r"^OPTION (\w+) (.*)$", done.stdout, re.MULTILINE))
    assert found, done.stdout + done.stderr
    return found


@pytest.fixture(scope="module")
def from_ini(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return _options(tmp_path_factory.mktemp("ini"))


@pytest.fixture(scope="module")
def from_cli(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return _options(tmp_path_factory.mktemp("cli"), *(arg for arg, _ in CLI.values()))


@pytest.mark.parametrize("dest", sorted(INI))
def test_every_option_is_an_ini_key(from_ini: dict[str, str], dest: str) -> None:
    assert from_ini[dest] == INI[dest][1]


@pytest.mark.parametrize("dest", sorted(CLI))
def test_the_command_line_wins(from_cli: dict[str, str], dest: str) -> None:
    assert from_cli[dest] == CLI[dest][1]


def test_every_profile_option_has_its_ini_key(pytester: pytest.Pytester) -> None:
    text = pytester.runpytest("--help").stdout.str()
    flags = set(re.findall(r"^\s+(--profile[a-z-]*)", text, re.MULTILINE))
    keys = set(re.findall(r"^\s+(profile[a-z_]*) \(", text, re.MULTILINE))
    keys -= {ini_key(flag) for flag in REMOVED}  # kept to say what replaces them
    assert len(flags) >= 20
    assert {f[2:].replace("-", "_") for f in flags} == keys
    assert keys == set(INI)  # a new option: add its case above


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("profile_interval = fast", "ini key profile_interval = 'fast': expected a number"),
        ("profile_clock = gpu", "ini key profile_clock = 'gpu': expected one of cpu, wall"),
        ("profile_budget = regression=ten", "--profile-budget regression=ten: expected a fraction"),
        ("profile_budget = leaks", "--profile-budget: expected KEYWORD=VALUE"),
        ("profile_budget = lekas=false", "unknown keyword 'lekas' (did you mean 'leaks'?)"),
        ("profile_repeat = 0", "ini key profile_repeat = '0': expected a whole number >= 1"),
        ("profile = maybe", "ini key profile:"),
    ],
)
def test_bad_ini_values_are_usage_errors(pytester: pytest.Pytester, line: str, message: str):
    pytester.makepyfile("def test_x(): pass")
    pytester.makeini(f"[pytest]\n{line}\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str(), result.stderr.str()
    assert "Traceback" not in result.stderr.str()


@pytest.mark.parametrize(
    ("flag", "text", "expected"),
    [
        ("--profile-interval", "10ms", 0.01),
        ("--profile-interval", "0.02 s", 0.02),
        ("--profile-memory-threshold", "2 MiB", 2097152),
    ],
)
def test_natural_values(flag: str, text: str, expected: float) -> None:
    group = pytest.Parser(_ispytest=True).getgroup("t")
    options.add_options(group.parser)  # type: ignore[arg-type]
    (argument,) = [a for g in group.parser._groups for a in g.options if flag in a.names()]
    assert argument.type(text) == pytest.approx(expected)


GATES = """
from pytest_scalene.config.options import GateOptions


def test_show(pytestconfig):
    gates = GateOptions.from_config(pytestconfig)
    print("REGRESSION", gates.regression, "BUDGET", gates.budget)
"""


def test_a_budget_for_every_test_on_the_command_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_show=GATES)
    budget = ("--profile-budget=regression=10%", "--profile-budget", "copy_mb_s=1 GB/s")
    result = pytester.runpytest("-s", "-p", "no:cacheprovider", *budget)
    assert "REGRESSION 0.1 BUDGET (('copy_mb_s', '1 GB/s'),)" in result.stdout.str()


@pytest.mark.parametrize("flag", sorted(REMOVED))
def test_a_removed_option_says_what_replaces_it(pytester: pytest.Pytester, flag: str) -> None:
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest("-p", "no:cacheprovider", f"{flag}=1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"argument {flag}: was removed: use {REMOVED[flag]}" in result.stderr.str()
    pytester.makeini(f"[pytest]\n{flag[2:].replace('-', '_')} = 1\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"{flag} was removed: use {REMOVED[flag]}" in result.stderr.str()
