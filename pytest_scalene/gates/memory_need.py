"""Whether a plain `pytest` run needs the allocator shim: do the selected tests set a memory
budget (`perf_budget(peak_mb=...)`, alloc_mb, copy..., `leaks=False`)?

The shim must be preloaded before the interpreter starts (preload.py), long before collection,
so the decision is made from the test files' text: a file that names `perf_budget` and a memory
keyword. A false positive costs one re-execution (~0.1 s); a suite without memory budgets reads
its test files once and pays nothing else. A memory budget hidden from the text (a marker added
by a hook) is reported by its test as "cannot be checked", naming --profile-memory=yes.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..core.runenv import MARKER

SKIPPED_DIRS = {"__pycache__", "node_modules", "site-packages", "build", "dist"}
MAX_FILES = 5000  # a run started at the top of a huge tree stops scanning here (no preload)


@lru_cache(maxsize=1)
def _memory_keyword() -> re.Pattern[str]:
    from .metrics import METRICS  # with the samplers: only once a file names the marker

    names = sorted(n for n, m in METRICS.items() if m.source == "memory" and n != "leaks")
    return re.compile(r"\b(?:" + "|".join(names) + r")\s*=|\bleaks\s*=\s*False\b")


def text_needs_memory(text: str) -> bool:
    """`text` (a Python file) may put a memory budget on a test."""
    return MARKER in text and _memory_keyword().search(text) is not None


def _test_files(start: Path, patterns: list[str]) -> Iterator[Path]:
    if start.is_file():
        yield start
        return
    for root, dirs, files in os.walk(start):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIPPED_DIRS)
        for name in sorted(files):
            if name == "conftest.py" or any(fnmatch.fnmatch(name, p) for p in patterns):
                yield Path(root, name)


def paths_need_memory(starts: list[Path], patterns: list[str]) -> bool:
    """Some test file (or conftest) under `starts` may set a memory budget."""
    seen = 0
    for start in starts:
        for path in _test_files(start, patterns):
            seen += 1
            if seen > MAX_FILES:
                return False
            try:
                if text_needs_memory(path.read_text(encoding="utf-8", errors="replace")):
                    return True
            except OSError:
                continue
    return False


def selected_need_memory(early_config: Any) -> bool:
    """The files this run will collect (its arguments, else testpaths, else the current
    directory) may set a memory budget."""
    args = [str(a).split("::")[0] for a in early_config.known_args_namespace.file_or_dir or []]
    base = Path(early_config.invocation_params.dir)
    if not args:
        try:
            args = list(early_config.getini("testpaths")) or ["."]
        except (ValueError, KeyError):
            args = ["."]
    try:
        patterns = list(early_config.getini("python_files"))
    except (ValueError, KeyError):
        patterns = ["test_*.py", "*_test.py"]
    starts = [p for p in (base / a for a in args) if p.exists()]
    return paths_need_memory(starts, patterns)
