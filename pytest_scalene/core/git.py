"""git, as the plugin runs it: the A/B mode's baseline worktree (compare_ref/git_tree.py) and a
run's identity in the history store (history/run_records.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path


class GitError(Exception):
    """A problem with git, the repository or a ref, worded for the user."""


def git(cwd: Path | str, *args: str, timeout_s: float = 120.0) -> str:
    """`git ARGS` in `cwd`: its output, stripped. Raises GitError saying what went wrong."""
    try:
        done = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout_s
        )
    except FileNotFoundError as exc:  # git itself, or the folder to run it in
        missing = "git is not installed" if exc.filename == "git" else f"{cwd} does not exist"
        raise GitError(missing) from None
    except subprocess.TimeoutExpired:
        raise GitError(f"git {' '.join(args)} took more than {timeout_s:g} s") from None
    except OSError as exc:
        raise GitError(f"git {' '.join(args)} could not run: {exc}") from None
    if done.returncode != 0:
        raise GitError(done.stderr.strip() or f"git {' '.join(args)} failed")
    return done.stdout.strip()


def git_or_none(cwd: Path | str, *args: str, timeout_s: float = 10.0) -> str | None:
    """As git(), None where it fails (outside a repository, git missing)."""
    try:
        return git(cwd, *args, timeout_s=timeout_s)
    except GitError:
        return None
