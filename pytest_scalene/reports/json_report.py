"""The JSON profile (--profile-json; schema in docs/json-schema.md), what CI and other tools
read: `write_json` writes the final file at the end of the session, from the profile codec's
dicts (core/codec.py), and `JsonCheckpoint` keeps the file current while the session runs, so
that a crash loses one test.

A test that segfaults, calls os._exit, or is killed (pytest-timeout's thread method, SIGTERM,
SIGKILL) ends the process before pytest_sessionfinish writes the JSON. So before each test
starts, the file is rewritten (atomically: readers see a whole file, never half of one) with
every test finished so far and a note naming the test about to run; if the session ends
normally, pytest_sessionfinish replaces it with the final file, without that note.

Cost: each finished test is serialised once (when it finishes) and each checkpoint joins the
cached texts, so a checkpoint costs about one copy of the file; it skips fsync (a process crash
keeps what was written; only a machine crash could lose it, and the final write has fsync).
The replace still costs milliseconds on ext4, so checkpoints are capped at BUDGET of the
session's time: in a suite of tests much shorter than a checkpoint, one is skipped when the
cap is reached, and a crash may then also lose the few tests finished since the last one.
Registered as plugin "scalene-json-checkpoint": `-p no:scalene-json-checkpoint` turns it off.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from ..core import runenv
from ..core.atomic_write import write_text_atomic
from ..core.codec import session_to_dict, test_to_dict
from ..core.model import SessionProfile, TestProfile

PLUGIN_NAME = "scalene-json-checkpoint"
UNFINISHED = (
    "unfinished: this file was written when {nodeid} started and the session did not finish"
    " (a crash, os._exit or a kill at or after that test)"
)
BUDGET = 0.05  # the most of the session's wall time that checkpoints may take
_EMPTY_TESTS = '"tests": {}'


def write_json(session: SessionProfile, path: str | os.PathLike[str]) -> None:
    write_text_atomic(path, json.dumps(session_to_dict(session), indent=1) + "\n")


class JsonCheckpoint:
    def __init__(self, session: SessionProfile, path: Path) -> None:
        self.session = session
        self.path = path
        self._done: dict[str, tuple[TestProfile, str]] = {}  # nodeid -> (profile, its entry)
        self.failed: str | None = None  # why checkpoints stopped (the final write still runs)
        self._began = time.perf_counter()
        self._spent = 0.0
        self.written = self.skipped = 0

    def text(self, running: str) -> str:
        """The JSON profile as it stands, with a note that `running` had not finished."""
        notes = [*self.session.notes, UNFINISHED.format(nodeid=running)]
        head = SessionProfile(self.session.interval_s, self.session.clock, notes=notes)
        skeleton = json.dumps(session_to_dict(head), indent=1)
        at = skeleton.rfind(_EMPTY_TESTS)
        rest = skeleton[at + len(_EMPTY_TESTS) :]
        if at < 0 or rest.strip() != "}":  # "tests" is no longer last: do it the slow way
            head.tests = self.session.tests
            return json.dumps(session_to_dict(head), indent=1) + "\n"
        parts = []
        for nodeid, profile in self.session.tests.items():
            cached = self._done.get(nodeid)
            fresh = cached is None or cached[0] is not profile
            parts.append(_entry(nodeid, profile) if fresh else cached[1])  # type: ignore[index]
        return skeleton[:at] + '"tests": {\n' + ",\n".join(parts) + "\n}" + rest + "\n"

    def write(self, running: str) -> None:
        if self.failed is not None:
            return
        start = time.perf_counter()
        if self.written and self._spent > BUDGET * (start - self._began):
            self.skipped += 1
            return
        try:
            write_text_atomic(self.path, self.text(running), durable=False)
            self.written += 1
        except (OSError, ValueError, TypeError) as exc:
            # The final write reports an unwritable path; a profile that cannot be serialised
            # fails there too. A checkpoint never fails a test.
            self.failed = f"{type(exc).__name__}: {exc}"
        self._spent += time.perf_counter() - start

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.write(nodeid)

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        profile = self.session.tests.get(nodeid)
        if profile is not None:
            try:
                self._done[nodeid] = (profile, _entry(nodeid, profile))
            except (ValueError, TypeError):
                self._done.pop(nodeid, None)


def _entry(nodeid: str, profile: TestProfile) -> str:
    return f"{json.dumps(nodeid)}: {json.dumps(test_to_dict(profile))}"


def install(config: pytest.Config, session: SessionProfile, path: Path) -> None:
    """Checkpoint `path` before each test, except on xdist (a worker's profiles go to the
    controller; a worker that crashes is replaced and the controller writes the file)."""
    if runenv.is_xdist_worker(config) or runenv.in_xdist_worker_process():
        return
    if runenv.is_xdist_controller(config):
        return
    config.pluginmanager.register(JsonCheckpoint(session, path), PLUGIN_NAME)
