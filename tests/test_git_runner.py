"""The one git runner (core/git.py): its errors say what went wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_scalene.core import git as git_runner


def test_a_missing_folder_is_not_a_missing_git(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    with pytest.raises(git_runner.GitError, match=f"{gone} does not exist"):
        git_runner.git(gone, "status")
    assert git_runner.git_or_none(gone, "status") is None


def test_a_missing_git_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no git on it
    with pytest.raises(git_runner.GitError, match="git is not installed"):
        git_runner.git(tmp_path, "status")
