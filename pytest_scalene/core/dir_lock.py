"""An exclusive lock on a directory (flock on the directory itself: no lock file to commit), so
that parallel runs saving baselines into one directory (CI shards on one runner, several
sessions) read, merge and write each module file in turn instead of losing each other's tests."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def locked(directory: str | os.PathLike[str]) -> Iterator[None]:
    os.makedirs(directory, exist_ok=True)
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock
