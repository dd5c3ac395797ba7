"""What a profiled test leaves for the rest of the session to carry: every profile is kept to
the report, and each object of it that the cyclic collector tracks makes each of its full
collections longer. A short test that no sample landed in keeps its profile alone: its figures,
its timeline and its empty leak lists are untracked (measured: 10 tracked objects a test made
full mode's collections cost ~20 us a test on a suite of trivial tests)."""

from __future__ import annotations

import json

import pytest

CONFTEST = """
import gc
import json


def _tracked_inside(profile):
    found, todo, seen = [], list(gc.get_referents(profile)), set()
    while todo:
        obj = todo.pop()
        if id(obj) in seen or not gc.is_tracked(obj) or isinstance(obj, type):
            continue
        seen.add(id(obj))
        found.append(type(obj).__name__)
        todo += gc.get_referents(obj)
    return found


def pytest_sessionfinish(session):
    gc.collect()
    gc.collect()  # a dict is untracked only when it reaches the oldest generation
    profiles = [o for o in gc.get_objects() if type(o).__name__ == "TestProfile"]
    found = {p.nodeid: [_tracked_inside(p), "timeline" in p.extra] for p in profiles}
    with open("tracked.json", "w") as f:
        json.dump(found, f)
"""
SUITE = """
import pytest


@pytest.mark.parametrize("i", range(20))
def test_short(i):
    assert sum(range(100)) == 4950
"""


@pytest.mark.parametrize("memory", ["no", "auto"])
def test_a_short_tests_profile_holds_nothing_the_collector_walks(pytester, memory):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_short=SUITE)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--profile", f"--profile-memory={memory}", "--profile-gpu=no"
    )
    result.assert_outcomes(passed=20)
    found = json.loads((pytester.path / "tracked.json").read_text())
    assert len(found) == 20
    assert all(timeline == (memory == "auto") for _, timeline in found.values())
    assert {nodeid: tracked for nodeid, (tracked, _) in found.items() if tracked} == {}
