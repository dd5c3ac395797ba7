"""The stored CPU times cannot gate a short test: its comparison passes whatever the slowdown
below its noise rule's limit (a test of 0.03 s fails only above 0.16 s). On a third-party suite
of millisecond tests a 1.5x slowdown passed every test unremarked. A run that compared such
tests says how many, and does not pass them as judged: exit status 7, unless the user accepts
ungated CPU (--profile-allow-ungated-cpu) or another gate judged the test's CPU (A/B)."""

from __future__ import annotations

import json

from pytest_scalene.core import extra_keys
from pytest_scalene.core.model import TestProfile
from pytest_scalene.gates import cpu_resolution

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
    compared = pytester.runpytest_subprocess(
        *common, "--profile-json=out.json", "--profile-markdown=out.md"
    )
    assert compared.ret == 7  # never a silent pass: the short tests' CPU was not judged
    said = " ".join(compared.stdout.str().split())
    assert "could not have caught a 2x slowdown in 2 of 3 compared tests" in said
    assert "gate it with --profile-compare-ref=REF or --profile-measure=instructions" in said
    assert (
        "2 passing test(s) not judged: 2 by the stored CPU times (--profile-compare): too "
        "short for sampled CPU time to catch a 2x slowdown (--profile-allow-ungated-cpu "
        "accepts that)"
    ) in said
    # The JSON and the Markdown summary count them too: "all gates passed" is not all it says.
    written = json.loads((pytester.path / "out.json").read_text())
    assert [(u["tests"], u["fails"]) for u in written["unjudged"]] == [(2, True)]
    summary = (pytester.path / "out.md").read_text()
    assert "**2 passing test(s) not judged**: 2 by the stored CPU times" in summary
    assert "The run fails for them (exit status 7)." in summary
    accepted = pytester.runpytest_subprocess(*common, "--profile-allow-ungated-cpu")
    assert accepted.ret == 0
    assert "(accepted: --profile-allow-ungated-cpu)" in " ".join(accepted.stdout.str().split())
    # Per test in the JSON, for a CI step that reads it.
    tests = json.loads((pytester.path / "out.json").read_text())["tests"]
    gated = {nodeid.split("::")[1]: t["baseline"]["cpu_gated"] for nodeid, t in tests.items()}
    assert gated == {"test_short_a": False, "test_short_b": False, "test_long": True}
    # Under xdist the workers judge and the controller writes the summary: it still says so
    # (of fewer tests: each worker's first test is a cold call, which the saving session's
    # second and third were not, and is not compared).
    spread = pytester.runpytest_subprocess(*common, "-n", "2")
    assert spread.ret == 7
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


def _blind(**extra: object) -> TestProfile:
    profile = TestProfile("test_x.py::test_x", outcome="passed")
    profile.extra[extra_keys.BASELINE] = {"cpu_fails_above_s": 0.09, "cpu_gated": False}
    profile.extra.update(extra)
    return profile


def test_an_ungated_cpu_is_left_unjudged_unless_another_gate_judged_it():
    gate = "the stored CPU times (--profile-compare)"
    why = cpu_resolution.unjudged(_blind(), extra_keys.BASELINE, gate, allowed=False)
    assert why is not None and why.fails and why.gate.startswith(gate)
    accepted = cpu_resolution.unjudged(_blind(), extra_keys.BASELINE, gate, allowed=True)
    assert accepted is not None and not accepted.fails
    # The A/B comparison judged its CPU: nothing left unjudged by the stored times.
    judged = _blind(**{extra_keys.AB: {"ratio": 1.0}})
    assert cpu_resolution.unjudged(judged, extra_keys.BASELINE, gate, allowed=False) is None
    # An A/B comparison that could not judge it (its note says why) does not stand in.
    noted = _blind(**{extra_keys.AB: {"note": "the worker crashed"}})
    assert cpu_resolution.unjudged(noted, extra_keys.BASELINE, gate, allowed=False) is not None
    gated = _blind()
    gated.extra[extra_keys.BASELINE]["cpu_gated"] = True
    assert cpu_resolution.unjudged(gated, extra_keys.BASELINE, gate, allowed=False) is None
    assert cpu_resolution.unjudged(TestProfile("t"), extra_keys.BASELINE, gate, False) is None
