"""Atomic file writes: readers see the old file or the new one, never half of either."""

from __future__ import annotations

import ctypes
import os
import sys
import tempfile
from pathlib import Path

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


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


def write_text_atomic(path: str | os.PathLike[str], text: str, durable: bool = True) -> None:
    """`durable=False` skips fsync: the file still replaces the old one whole, and survives the
    writing process's crash; only a machine crash could lose it (for frequent checkpoints)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
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
