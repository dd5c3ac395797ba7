"""Atomic file writes: readers see the old file or the new one, never half of either; and a lock on
a directory, so that parallel runs writing into it (CI shards on one runner, several sessions)
read, merge and write each file in turn instead of losing each other's tests."""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
# A folder for the temporary files of writes into a directory that people commit (baselines/):
# a kill between creating the temporary file and renaming it into place (SIGKILL, a CI job's
# timeout) leaves the file behind, and there `git add` would pick it up. This folder ignores
# itself while it exists, and is removed when the writes are done.
SCRATCH_FOLDER = ".pytest-scalene-tmp"


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _swap_in(tmp: str, target: Path) -> bool:
    """Atomically exchange `tmp` and an existing `target` (Linux renameat2), then remove the
    old file. ext4 flushes a file renamed over an existing one to disk (auto_da_alloc), which
    costs milliseconds on a busy disk; it does not for an exchange (about 0.3 ms for 100 KB).
    False where unsupported (other systems, file systems without RENAME_EXCHANGE)."""
    # Only a plain file: an exchange would move a directory or a symlink's place away.
    if not sys.platform.startswith("linux") or target.is_symlink() or not target.is_file():
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    names = (os.fsencode(tmp), os.fsencode(target))
    if renameat2(_AT_FDCWD, names[0], _AT_FDCWD, names[1], _RENAME_EXCHANGE) != 0:
        return False
    Path(tmp).unlink(missing_ok=True)  # the old file, now under the temporary name
    return True


def scratch_folder(directory: str | os.PathLike[str]) -> Path:
    """`directory`'s folder for temporary files, made if missing, with a .gitignore that
    ignores all of it (written first, so that git never sees a temporary file there)."""
    folder = Path(directory) / SCRATCH_FOLDER
    ignore = folder / ".gitignore"
    if not ignore.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        _write_whole(ignore, b"*\n# pytest-scalene's temporary files: never committed\n")
    return folder


def _write_whole(path: Path, content: bytes) -> None:
    """`path` appears with its content or not at all (Linux: written unnamed, then linked into
    place): a kill between creating a .gitignore and writing it left an empty one, which
    ignores nothing, for `git add` to pick up."""
    try:
        fd = os.open(path.parent, os.O_TMPFILE | os.O_WRONLY, 0o644)
    except (AttributeError, OSError):  # no O_TMPFILE here: written in place
        path.write_bytes(content)
        return
    parent = -1
    try:
        parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        os.write(fd, content)
        # linkat() following the descriptor's /proc link (with a directory descriptor, os.link
        # calls linkat with AT_SYMLINK_FOLLOW; without one, link(), which does not follow it)
        os.link(f"/proc/self/fd/{fd}", path.name, dst_dir_fd=parent)
    except FileExistsError:  # another save linked its own first
        pass
    except OSError:  # no /proc: written in place
        path.write_bytes(content)
    finally:
        os.close(fd)
        if parent >= 0:
            os.close(parent)


def remove_scratch_folder(directory: str | os.PathLike[str]) -> None:
    """Remove `directory`'s scratch folder with what killed writes left in it; call it only
    where no other process can be writing there (under the directory's lock)."""
    folder = Path(directory) / SCRATCH_FOLDER
    if not folder.is_dir():
        return
    for leftover in folder.glob(".*.tmp"):
        leftover.unlink(missing_ok=True)
    (folder / ".gitignore").unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # not empty: something else is in there, keep it
        folder.rmdir()


def write_text_atomic(
    path: str | os.PathLike[str],
    text: str,
    durable: bool = True,
    scratch: str | os.PathLike[str] | None = None,
) -> None:
    """`durable=False` skips fsync: the file still replaces the old one whole, and survives the
    writing process's crash; only a machine crash could lose it (for frequent checkpoints).
    `scratch`: where the temporary file is made (on the target's file system), instead of
    beside the target."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    folder = target.parent if scratch is None else Path(scratch)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual mode of new files
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        if durable or not _swap_in(tmp, target):
            os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def locked(directory: str | os.PathLike[str]) -> Iterator[None]:
    """An exclusive lock on `directory`: flock on the directory itself, so there is no lock file
    to commit."""
    os.makedirs(directory, exist_ok=True)
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock
