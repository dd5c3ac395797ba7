"""A requested gate that could not judge a passing test is never a silent pass: the tests are
counted per gate in the output's last lines and the run ends with EXIT_UNJUDGED, unless
--profile-allow-unjudged (each judge's `unjudged`, gates/pipeline.py, reports/terminal_summary.py).
The A/B end-to-end cases are in test_compare_ref.py; the history's is here (it needs no git
repository)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_scalene.compare_ref.ref_judge import NOTHING_TO_COMPARE, CompareRef
from pytest_scalene.compare_ref.ref_judge import UNJUDGED as AB_UNJUDGED
from pytest_scalene.config.history_options import HistoryOptions
from pytest_scalene.config.options import EXIT_UNJUDGED, GateOptions, Repeat
from pytest_scalene.core import runenv
from pytest_scalene.core.model import TestProfile
from pytest_scalene.gates.baseline_judge import COUNTS_UNJUDGED, StoredBaselines
from pytest_scalene.gates.judging import Budgets
from pytest_scalene.gates.pipeline import Unjudged, unjudged_counts
from pytest_scalene.history.history_gate import UNJUDGED as HISTORY_UNJUDGED
from pytest_scalene.history.history_gate import History
from pytest_scalene.reports.terminal_summary import unjudged_lines


def profile(nodeid: str, outcome: str = "passed", **extra: object) -> TestProfile:
    return TestProfile(nodeid, outcome, extra=dict(extra))


def counted(*profiles: TestProfile, allow_ungated_cpu: bool = False) -> dict[Unjudged, int]:
    options = GateOptions(False, True, Path("baselines"), Repeat(), None, None)
    stored = StoredBaselines(None, options._replace(allow_ungated_cpu=allow_ungated_cpu), "")  # type: ignore[arg-type]
    history = object.__new__(History)  # its `unjudged` reads its options and the profile alone
    history.options = HistoryOptions(None, True, 5, allow_ungated_cpu)
    judges = (Budgets, CompareRef, stored, history)  # the first two: the profile alone
    return unjudged_counts(judges, profiles)  # type: ignore[arg-type]


def test_unjudged_passing_tests_are_counted_per_gate():
    ab_judged = {"ref": "HEAD", "commit": "c", "verdict": "pass"}
    worker_died = {"ref": "HEAD", "commit": "c", "note": "not judged: the baseline worker ended"}
    new_test = {"ref": "HEAD", "note": "not judged: the test exists on the current side only"}
    history_notes = {"runs": 0, "notes": ["CPU time not judged against history: 0 earlier"]}
    found = counted(
        profile("a", ab=ab_judged, history={"runs": 5, "notes": []}),
        profile("b", ab=worker_died),
        profile("c", ab=worker_died, instructions_missing="the counting session did not run it"),
        profile("d", ab=new_test, history=history_notes),
        profile("e", "failed", ab=worker_died, instructions_missing="x"),  # never judged
    )
    assert list(found.items()) == [
        (AB_UNJUDGED, 2),
        (COUNTS_UNJUDGED, 1),
        (HISTORY_UNJUDGED, 1),
        (NOTHING_TO_COMPARE, 1),
    ]
    assert not NOTHING_TO_COMPARE.fails and AB_UNJUDGED.fails
    assert counted(profile("a", ab=ab_judged), profile("f", "skipped", ab=worker_died)) == {}


def test_a_test_whose_cpu_the_stored_times_or_the_history_could_not_gate_is_unjudged():
    blind = {"cpu_fails_above_s": 0.09, "cpu_gated": False}
    gated = {**blind, "cpu_gated": True}
    tests = (
        profile("a", baseline=blind, history={"runs": 5, "notes": [], **blind}),
        profile("b", baseline=blind),
        profile("c", baseline=gated),
        profile("d", baseline=blind, ab={"ref": "HEAD", "commit": "c", "verdict": "pass"}),
    )
    found = counted(*tests)
    assert [(why.gate.split(":")[0], why.fails, n) for why, n in found.items()] == [
        ("the stored CPU times (--profile-compare)", True, 2),
        ("the history's CPU times (--profile-compare-history)", True, 1),
    ]
    accepted = counted(*tests, allow_ungated_cpu=True)
    assert sorted(n for n in accepted.values()) == [1, 2]
    assert not any(why.fails for why in accepted)


def test_the_last_lines_count_them_and_say_how_to_let_the_run_pass():
    found = [{"gate": AB_UNJUDGED.gate, "tests": 65, "fails": True}]
    failing = unjudged_lines(found, EXIT_UNJUDGED, False, "--profile-allow-unjudged")
    assert failing == [
        "65 passing test(s) not judged: 65 by the A/B comparison (--profile-compare-ref)",
        f"the run fails with exit status {EXIT_UNJUDGED}; the notes above say why. To let such a "
        "run pass: --profile-allow-unjudged (ini: profile_allow_unjudged = true)",
    ]
    allowed = unjudged_lines(found, None, True, "--profile-allow-unjudged")
    assert allowed[0].endswith("(not a failure: --profile-allow-unjudged is set)")
    assert unjudged_lines([], EXIT_UNJUDGED, False, "--profile-allow-unjudged") == []
    assert EXIT_UNJUDGED not in {code.value for code in pytest.ExitCode}


def test_a_history_that_cannot_judge_fails_the_run_unless_allowed(pytester):
    pytester.makepyfile("def test_one():\n    assert sum(range(1000))\n")
    db = pytester.path / "h.db"
    args = ("-p", "no:cacheprovider", "--profile-memory=no", f"--profile-history={db}")
    result = pytester.runpytest_subprocess(*args, "--profile-compare-history")
    text = result.stdout.str()
    assert result.ret == EXIT_UNJUDGED, text
    result.assert_outcomes(passed=1)
    assert "1 passing test(s) not judged: 1 by the history (--profile-compare-history)" in text
    assert "not judged against history: 0 earlier passed run(s)" in text  # the note says why
    allowed = pytester.runpytest_subprocess(
        *args, "--profile-compare-history", "--profile-allow-unjudged"
    )
    assert allowed.ret == 0, allowed.stdout.str()
    assert "(not a failure: --profile-allow-unjudged is set)" in allowed.stdout.str()
    # Without the gate nothing is counted.
    assert pytester.runpytest_subprocess(*args, "--profile").ret == 0


def test_a_test_the_counting_session_missed_fails_the_run(pytester):
    from pytest_scalene.instructions import runner

    if (problem := runner.problem()) is not None:
        pytest.skip(problem)
    pytester.makepyfile(
        "import os\n\n\ndef test_counted():\n    assert sum(range(100))\n\n\n"
        "def test_missed():\n"
        f"    if os.environ.get({runenv.COUNTING_ENV!r}):  # under valgrind\n"
        "        os._exit(3)\n"
    )
    args = ("--profile-memory=no", "--profile", "--profile-measure=instructions")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)
    text = result.stdout.str()
    assert result.ret == EXIT_UNJUDGED, text
    result.assert_outcomes(passed=2)
    # the last lines wrap between their phrases to the terminal's width
    counted = re.search(r"(\d) passing test\(s\) not judged:\s+\d by instruction counts", text)
    assert counted and counted[1] in "12", text
    assert "test_missed: instructions not counted: " in text  # the note says why
