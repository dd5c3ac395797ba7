"""pytest-xdist: each test's profile also travels with its teardown report, so that a worker
that crashes (a segfault, os._exit, a kill) loses only the test it was running.

session_payload.py hands a worker's profiles to the controller at the end of the worker's session,
which a crashed worker never reaches: every test it had run would be lost. Here the worker
adds the finished profile to the teardown report (`TestReport` keeps unknown keys when xdist
serialises it); the controller stores it when the report arrives. session_payload.py's
end-of-session payload, when it comes, replaces these with the same figures.
"""

from __future__ import annotations

import contextlib
import json

import pytest

from ..core.codec import profile_from_dict, test_to_dict
from ..core.model import SessionProfile
from ..core.runenv import is_xdist_controller, is_xdist_worker

ATTRIBUTE = "scalene_profile"
PLUGIN_NAME = "scalene-xdist-relay"


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
