"""Source lines, for the reports and the baselines: a profile names a line by its file (relative
to the rootdir when under it) and number."""

from __future__ import annotations

import linecache
import os


def source_path(rootdir: str, file: str) -> str:
    """The file a profile names, as a path to open."""
    return file if os.path.isabs(file) else os.path.join(rootdir, file)


def source_line(rootdir: str, file: str, line: int, fresh: bool = False) -> str:
    """The line's text as in the file (with its newline), or "" when there is no such line.
    `fresh`: check first whether the file changed since linecache read it."""
    path = source_path(rootdir, file)
    if fresh:
        linecache.checkcache(path)  # the file may have been edited since it was first read
    return linecache.getline(path, line)
