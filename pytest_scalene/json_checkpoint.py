"""Keeps the --profile-json file current while the session runs, so that a crash loses one test.

A test that segfaults, calls os._exit, or is killed (pytest-timeout's thread method, SIGTERM,
SIGKILL) ends the process before pytest_sessionfinish writes the JSON. So before each test
starts, the file is rewritten (atomically: readers see a whole file, never half of one) with
every test finished so far and a note naming the test about to run; if the session ends
normally, pytest_sessionfinish replaces it with the final file, without that note.

Cost: each finished test is serialised once (when it finishes) and each checkpoint joins the
cached texts, so a checkpoint costs about one copy of the file; it skips fsync (a process crash
keeps what was written; only a machine crash could lose it, and the final write has fsync).
Registered as plugin "scalene-json-checkpoint": `-p no:scalene-json-checkpoint` turns it off.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from .atomic_write import write_text_atomic
from .json_report import session_to_dict, test_to_dict
from .model import SessionProfile, TestProfile

PLUGIN_NAME = "scalene-json-checkpoint"
UNFINISHED = "unfinished: the session stopped while {nodeid} was running"
_EMPTY_TESTS = '"tests": {}}'


class JsonCheckpoint:
    def __init__(self, session: SessionProfile, path: Path) -> None:
        self.session = session
        self.path = path
        self._done: dict[str, tuple[TestProfile, str]] = {}  # nodeid -> (profile, its JSON)
        self.failed: str | None = None  # why checkpoints stopped (the final write still runs)

    def text(self, running: str) -> str:
        """The JSON profile as it stands, with a note that `running` had not finished."""
        notes = [*self.session.notes, UNFINISHED.format(nodeid=running)]
        head = SessionProfile(self.session.interval_s, self.session.clock, notes=notes)
        skeleton = json.dumps(session_to_dict(head), indent=1)
        if not skeleton.endswith(_EMPTY_TESTS):  # "tests" is no longer last: do it the slow way
            head.tests = self.session.tests
            return json.dumps(session_to_dict(head), indent=1)
        parts = []
        for nodeid, profile in self.session.tests.items():
            cached = self._done.get(nodeid)
            fresh = cached is None or cached[0] is not profile
            body = json.dumps(test_to_dict(profile)) if fresh else cached[1]  # type: ignore[index]
            parts.append(f"{json.dumps(nodeid)}: {body}")
        return skeleton[: -len(_EMPTY_TESTS)] + '"tests": {' + ",\n".join(parts) + "}}\n"

    def write(self, running: str) -> None:
        if self.failed is not None:
            return
        try:
            write_text_atomic(self.path, self.text(running), durable=False)
        except (OSError, ValueError, TypeError) as exc:
            # The final write reports an unwritable path; a profile that cannot be serialised
            # fails there too. A checkpoint never fails a test.
            self.failed = f"{type(exc).__name__}: {exc}"

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.write(nodeid)

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        profile = self.session.tests.get(nodeid)
        if profile is not None:
            try:
                self._done[nodeid] = (profile, json.dumps(test_to_dict(profile)))
            except (ValueError, TypeError):
                self._done.pop(nodeid, None)


def install(config: pytest.Config, session: SessionProfile, path: Path | None) -> None:
    """Checkpoint `path` before each test, except on xdist (a worker's profiles go to the
    controller; a worker that crashes is replaced and the controller writes the file)."""
    if path is None or hasattr(config, "workerinput") or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    if getattr(config.option, "dist", "no") != "no":  # the xdist controller
        return
    config.pluginmanager.register(JsonCheckpoint(session, path), PLUGIN_NAME)
