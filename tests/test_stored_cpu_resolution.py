"""The stored CPU times cannot gate a short test: its comparison passes whatever the slowdown
below its noise rule's limit (a test of 0.03 s fails only above 0.16 s). A run that compared
such tests says how many, so that "baseline comparisons 0 failed" is not read as CPU judged:
on a third-party suite of millisecond tests a 1.5x slowdown passed every test unremarked."""

from __future__ import annotations

import json

SUITE = """
import time


def spin(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_short_a():
    spin(0.002)


def test_short_b():
    spin(0.002)


def test_long():
    spin(0.8)  # above ~0.35 s of CPU a doubling fails (the +75% tolerance decides)
"""


def test_a_compare_names_the_tests_whose_cpu_it_could_not_gate(pytester):
    pytester.makepyfile(test_timed=SUITE)
    saved = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--profile", "--profile-memory=no", "--profile-save-baseline"
    )
    assert saved.ret == 0
    common = ["-p", "no:cacheprovider", "--profile", "--profile-memory=no", "--profile-compare"]
    compared = pytester.runpytest_subprocess(*common, "--profile-json=out.json")
    assert compared.ret == 0  # a note, not a failure: the comparisons that ran passed
    said = "could not have caught a 2x slowdown in 2 of 3 compared tests"
    assert said in " ".join(compared.stdout.str().split())
    compared.stdout.fnmatch_lines(["*--profile-compare-ref=REF or --profile-measure=instruct*"])
    # Per test in the JSON, for a CI step that reads it.
    tests = json.loads((pytester.path / "out.json").read_text())["tests"]
    gated = {nodeid.split("::")[1]: t["baseline"]["cpu_gated"] for nodeid, t in tests.items()}
    assert gated == {"test_short_a": False, "test_short_b": False, "test_long": True}
    # Under xdist the workers judge and the controller writes the summary: it still says so
    # (of fewer tests: each worker's first test is a cold call, which the saving session's
    # second and third were not, and is not compared).
    spread = pytester.runpytest_subprocess(*common, "-n", "2")
    assert spread.ret == 0
    spread.stdout.fnmatch_lines(["CPU: the stored times could not have caught a 2x slowdown*"])


def test_a_session_of_long_tests_has_no_such_note(pytester):
    pytester.makepyfile(
        test_timed=SUITE.split("def test_short_a")[0] + "def test_long():\n    spin(0.8)\n"
    )
    for option in ("--profile-save-baseline", "--profile-compare"):
        done = pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", "--profile", "--profile-memory=no", option
        )
        assert done.ret == 0
    assert "could not have caught" not in done.stdout.str()
