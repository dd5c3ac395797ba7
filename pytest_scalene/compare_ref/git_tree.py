"""The baseline's tree: REF checked out with `git worktree add --detach` in a temporary
directory, removed (and pruned from the repository's worktree list) when the comparison ends."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path

from ..core.git import GitError
from ..core.git import git as _git


def repository_root(path: Path) -> Path:
    """The top of the git working tree that holds `path`."""
    try:
        return Path(_git(path, "rev-parse", "--show-toplevel")).resolve()
    except GitError:
        raise GitError(
            f"{path} is not inside a git repository: --profile-compare-ref checks the baseline "
            "out of the repository's history"
        ) from None


def resolve(root: Path, ref: str) -> str:
    """The commit `ref` names; an unknown ref is an error naming it."""
    try:
        return _git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except GitError:
        raise GitError(
            f"unknown git ref {ref!r} in {root} (in CI, fetch it first, e.g. `git fetch origin "
            "main` for origin/main; a shallow clone may lack it)"
        ) from None


def is_dirty(root: Path) -> bool:
    """Uncommitted changes to tracked files (they are part of the current side)."""
    return bool(_git(root, "status", "--porcelain", "--untracked-files=no"))


class Worktree:
    """`with Worktree(root, commit) as tree:` the commit checked out at `tree`."""

    def __init__(self, root: Path, commit: str) -> None:
        self.root = root
        self.commit = commit
        self.parent = Path(tempfile.mkdtemp(prefix="pytest-scalene-ab-"))
        self.path = self.parent / "baseline"

    def __enter__(self) -> Path:
        try:
            _git(self.root, "worktree", "add", "--detach", "--quiet", str(self.path), self.commit)
        except GitError as exc:
            shutil.rmtree(self.parent, ignore_errors=True)
            raise GitError(
                f"cannot check out {self.commit[:12]} in a git worktree: {exc}"
            ) from None
        return self.path

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(GitError):
            _git(self.root, "worktree", "remove", "--force", str(self.path))
        shutil.rmtree(self.parent, ignore_errors=True)
        with contextlib.suppress(GitError):
            _git(self.root, "worktree", "prune")


def saved_from(path: Path) -> str:
    """The commit checked out at `path`, "+dirty" when tracked files have uncommitted changes,
    "" outside a git repository (what a baseline records as its origin)."""
    try:
        root = Path(_git(path, "rev-parse", "--show-toplevel"))
        commit = _git(root, "rev-parse", "HEAD")
        return commit + ("+dirty" if is_dirty(root) else "")
    except GitError:
        return ""
