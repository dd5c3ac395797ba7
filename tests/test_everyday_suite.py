"""A suite built like a real one (tests/data/everyday_suite: 335 millisecond tests, unittest
classes, skips, non-idempotent tests, budgets including memory) run as a user runs it: plain,
with --profile, with --profile-repeat=3 --profile-compare, and with -n 2. Every mode gives the
same outcome for every test, the same counts and the same JUnit figures; the memory budgets are
judged in plain pytest; the default terminal report is a summary that fits two screens."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest
from shim_support import outside_xdist

SUITE = Path(__file__).parent / "data" / "everyday_suite"
COUNTS = {"failed": 2, "passed": 326, "skipped": 5, "xfailed": 2}
FAILED = {"test_budgets.py::test_peak_over_budget", "test_records.py::test_fails_on_purpose"}
NOT_IDEMPOTENT = (
    "test_stateful.py::test_registers_once",
    "test_stateful.py::test_consumes_a_token",
    "test_stateful.py::test_skips_when_warm",
    "test_stateful.py::TestCounter::test_first_run_only",
    "test_stateful.py::TestCounter::test_skips_when_repeated",
)
SCREEN = 50  # lines of a terminal screen


@dataclass
class Run:
    counts: dict[str, int]
    failed: dict[str, str]  # nodeid: the short summary's message
    junit: dict[str, str]  # per test case (classname::name): its outcome
    junit_totals: dict[str, str]
    output: str


def _junit(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    totals = {k: suite.get(k, "") for k in ("tests", "failures", "errors", "skipped")}
    cases = {}
    for case in suite.iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        cases[f"{case.get('classname')}::{case.get('name')}"] = ",".join(kinds) or "passed"
    return cases, totals


def run_suite(directory: Path, *args: str) -> Run:
    junit = directory / "junit.xml"
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rf", *args]
    done = subprocess.run(
        [*command, f"--junitxml={junit}"],
        cwd=directory,
        env=outside_xdist(),
        capture_output=True,
        text=True,
    )
    output = done.stdout + done.stderr
    # pytest's closing line, "=== 3 passed, 1 failed in 1.2s ===": the last of stdout's, whatever
    # other plugins print after it or on stderr
    finals = re.findall(r"^=+ (.+) in [\d.]+s\b.*=+$", done.stdout, re.MULTILINE)
    assert finals, output[-2000:]
    counts = {
        word: int(n) for n, word in re.findall(r"(\d+) (\w+)", finals[-1]) if word != "warning"
    }
    counts.pop("warnings", None)
    failed = dict(re.findall(r"^FAILED (\S+) - (.*)$", output, re.MULTILINE))
    cases, totals = _junit(junit)
    return Run(counts, failed, cases, totals, output)


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("everyday")
    for source in SUITE.glob("suite_*.py"):
        shutil.copy(source, directory / source.name.replace("suite_", "test_", 1))
    return directory


@pytest.fixture(scope="module")
def plain(suite: Path) -> Run:
    return run_suite(suite)


@pytest.fixture(scope="module")
def profiled(suite: Path) -> Run:
    return run_suite(suite, "--profile")


def test_plain_pytest_judges_memory_budgets(plain: Run) -> None:
    assert plain.counts == COUNTS, plain.output[-3000:]
    assert set(plain.failed) == FAILED
    # judged, not "cannot be checked": the shim was preloaded for the memory budgets
    assert re.match(r"peak memory \d+\.\d MB > budget", plain.failed[sorted(FAILED)[0]])
    assert plain.junit_totals == {"tests": "335", "failures": "2", "errors": "0", "skipped": "7"}


def _same_as_plain(run: Run, plain: Run) -> None:
    assert run.counts == plain.counts, run.output[-3000:]
    assert set(run.failed) == set(plain.failed)
    assert run.junit_totals == plain.junit_totals
    assert run.junit == plain.junit


def test_profile_changes_no_outcome(plain: Run, profiled: Run) -> None:
    _same_as_plain(profiled, plain)


def test_repeat_and_compare_change_no_outcome(suite: Path, plain: Run) -> None:
    saved = run_suite(suite, "--profile-save-baseline")
    _same_as_plain(saved, plain)
    compared = run_suite(
        suite, "--profile-repeat=3", "--profile-compare", "--profile-markdown=s.md"
    )
    _same_as_plain(compared, plain)
    # the tests that fail or skip when called again say so, and keep their first run's outcome
    summary = (suite / "s.md").read_text()
    for nodeid in NOT_IDEMPOTENT:
        # however the terminal report wrapped it (between its clauses at 80 columns)
        said = re.escape(nodeid) + r":\s+not repeatable:\s+run 2 "
        assert re.search(said, compared.output), compared.output
        assert f"`{nodeid}`: not repeatable: run 2 " in summary
    # the Markdown summary states every failure, not only the gates'
    assert "Tests: 2 failed, 326 passed, 5 skipped, 2 xfailed." in summary
    for nodeid in FAILED:
        assert f"| `{nodeid}` | call |" in summary


def test_xdist_changes_no_outcome(suite: Path, plain: Run) -> None:
    pytest.importorskip("xdist")
    _same_as_plain(run_suite(suite, "-n", "2"), plain)


def _profile_section(output: str) -> list[str]:
    lines = output.splitlines()
    start = next(i for i, ln in enumerate(lines) if "pytest-scalene profile" in ln)
    end = next(i for i, ln in enumerate(lines) if "short test summary info" in ln)
    return lines[start:end]


def test_default_report_is_a_summary_of_two_screens(profiled: Run) -> None:
    assert len(profiled.output.splitlines()) <= 2 * SCREEN
    section = _profile_section(profiled.output)
    text = "\n".join(section)
    assert section[1].startswith("333 tests profiled")
    assert re.search(r"\n3\d\d of 333 tests ran under one sampling interval", text)
    assert "budgets 1 failed of 5" in text
    tops = text.split("Top tests by peak memory:\n")[1].splitlines()
    assert "test_budgets.py::test_peak_over_budget" in tops[0]  # the 60 MB test first
    assert "test_budgets.py::test_peak_within_budget" in tops[1]
    # The allocating line (14) is named, not the one after it.
    assert "Top lines by memory" in text and "test_budgets.py:14" in text
    failed = text.split("Failed gates:\n")[1]
    assert failed.splitlines()[0].strip() == "test_budgets.py::test_peak_over_budget"
    assert "budget FAIL: peak memory" in failed and "test_budgets.py:14" in failed
    assert "[passed]" not in text  # no per test blocks


def test_details_on_request(suite: Path) -> None:
    detailed = run_suite(suite, "--profile", "-v", "-k", "budgets")
    text = "\n".join(_profile_section(detailed.output))
    assert "test_budgets.py::test_cpu_within_budget  [passed]" in text
    assert "Top tests by CPU" not in text


def test_saving_twice_leaves_the_baselines_byte_identical(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    directory = tmp_path_factory.mktemp("resave")
    for source in SUITE.glob("suite_*.py"):
        shutil.copy(source, directory / source.name.replace("suite_", "test_", 1))
    run_suite(directory, "--profile-save-baseline")
    first = {p.name: p.read_bytes() for p in (directory / "baselines").iterdir()}
    assert len(first) == 4 + 1  # a baseline per module, and the code map (docs/selection.md)
    again = run_suite(directory, "--profile-save-baseline")
    assert {p.name: p.read_bytes() for p in (directory / "baselines").iterdir()} == first
    assert again.output.count("baseline unchanged: ") == 4


def test_an_interrupted_run_says_so(suite: Path) -> None:
    stopped = run_suite(suite, "-x", "--profile-markdown=x.md")
    summary = (suite / "x.md").read_text()
    assert "**The run stopped early: stopping after 1 failures**" in summary
    assert stopped.counts["failed"] == 1


def test_errors_are_repeated_at_the_end(suite: Path) -> None:
    (suite / "blocker").write_text("a file where a directory is wanted\n")
    run = run_suite(suite, "--profile", "--profile-markdown=blocker/s.md", "-k", "stateful")
    tail = run.output.split("pytest-scalene errors")[1]
    assert "ERROR --profile-markdown: cannot write blocker" in tail
    assert "pytest-scalene profile" in run.output.split("pytest-scalene errors")[0]
