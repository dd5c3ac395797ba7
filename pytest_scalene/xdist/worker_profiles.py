"""pytest-xdist: how each worker's profiles (verdicts included) reach the controller, which merges
them and alone writes the JSON, the baselines and the Markdown summary. Two ways, both through the
profile codec (core/codec.py):

- at the end of the worker's session, all of them in `workeroutput` (`send`), read by the
  controller in pytest_testnodedown (`receive`);
- each test's, with its teardown report (`WorkerRelay`, `ControllerRelay`): a worker that
  crashes (a segfault, os._exit, a kill) never reaches the end of its session, and would lose
  every test it had run; this way it loses only the one it was running. `TestReport` keeps
  unknown keys when xdist serialises it. The end-of-session payload, when it comes, replaces
  these with the same figures.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest

from ..core.codec import profile_from_dict, test_to_dict
from ..core.model import SessionProfile
from ..core.runenv import is_xdist_controller, is_xdist_worker

OUTPUT_KEY = "pytest_scalene"
ATTRIBUTE = "scalene_profile"
PLUGIN_NAME = "scalene-xdist-relay"


def send(config: pytest.Config, session: SessionProfile) -> None:
    """On a worker: hand this worker's profiles to the controller."""
    payload = {
        "notes": list(session.notes),
        "tests": {nodeid: test_to_dict(p) for nodeid, p in session.tests.items()},
    }
    config.workeroutput[OUTPUT_KEY] = json.dumps(payload)  # type: ignore[attr-defined]


def receive(workeroutput: dict[str, Any], session: SessionProfile) -> None:
    """On the controller: merge one worker's profiles into the session."""
    text = workeroutput.get(OUTPUT_KEY)
    if not text:
        return
    payload = json.loads(text)
    for note in payload.get("notes", []):
        if note not in session.notes:
            session.notes.append(note)
    for nodeid, data in payload.get("tests", {}).items():
        session.tests[nodeid] = profile_from_dict(nodeid, data)


class WorkerRelay:
    def __init__(self, session: SessionProfile) -> None:
        self.session = session

    @pytest.hookimpl(tryfirst=True)  # before xdist's worker sends the report
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        profile = self.session.tests.get(report.nodeid)
        if report.when == "teardown" and profile is not None:
            # If it cannot be serialised, the end-of-session payload carries it or says why not.
            with contextlib.suppress(TypeError, ValueError):
                setattr(report, ATTRIBUTE, json.dumps(test_to_dict(profile)))


class ControllerRelay:
    def __init__(self, session: SessionProfile) -> None:
        self.session = session

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        text = getattr(report, ATTRIBUTE, None)
        if isinstance(text, str):
            with contextlib.suppress(TypeError, ValueError, KeyError):
                profile = profile_from_dict(report.nodeid, json.loads(text))
                self.session.tests[report.nodeid] = profile
            delattr(report, ATTRIBUTE)  # other plugins (report logs) need not carry it


def install(config: pytest.Config, session: SessionProfile) -> None:
    if is_xdist_worker(config):
        config.pluginmanager.register(WorkerRelay(session), PLUGIN_NAME)
    elif is_xdist_controller(config):
        config.pluginmanager.register(ControllerRelay(session), PLUGIN_NAME)
