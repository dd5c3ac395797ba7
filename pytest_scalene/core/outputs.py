"""Every file the run writes (--profile-json, --profile-html, --profile-speedscope,
--profile-markdown, --profile-save-baseline) goes through `Outputs.write`: a file that cannot be
written fails the run (exit status INTERNAL_ERROR: CI wants the artifact) with one line naming
the option and the path, shown at once and repeated at the end of the output; never a traceback.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest


class Outputs:
    def __init__(self) -> None:
        self.errors: list[str] = []  # repeated at the end (profiling_session.py's terminal summary)

    def write(
        self,
        session: pytest.Session,
        option: str,
        path: str | os.PathLike[str],
        action: Callable[[], object],
    ) -> bool:
        """Run `action` (the write); return whether it succeeded."""
        try:
            action()
            return True
        except OSError as exc:
            reason = exc.strerror or exc
            reporter = session.config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                reporter.ensure_newline()  # not glued to the progress line
                message = f"pytest-scalene: cannot write {option} file {path}: {reason}"
                reporter.write_line(message, red=True, bold=True)
            self.errors.append(f"ERROR {option}: cannot write {exc.filename or path}: {reason}")
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
            return False
