"""Merging the baseline directories that CI shards saved into one baselines/.

Each shard saves the tests it ran and keeps the stored entries of the others, so one test can
appear in every shard's copy. With `base` (the baselines the shards started from), the entry
that differs from the base wins; without it, copies must be equal. Two shards that changed the
same test differently are a conflict, reported with both directories, never resolved silently.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from . import baseline_store
from .baseline_store import BaselineError, ModuleBaseline, TestEntry


class BaselineMergeError(Exception):
    """Baselines that cannot be merged; str() names the test or file and the directories."""


def _load(directory: Path) -> dict[str, ModuleBaseline]:
    if not directory.is_dir():
        raise BaselineMergeError(f"{directory}: not a baseline directory")
    found, errors = baseline_store.load_dir(directory)
    if errors:
        raise BaselineMergeError("cannot merge unusable baselines:\n  " + "\n  ".join(errors))
    return found


def merge_dirs(
    sources: Sequence[str | os.PathLike[str]],
    output: str | os.PathLike[str],
    base: str | os.PathLike[str] | None = None,
) -> list[Path]:
    """Write the merged baselines of `sources` to `output`; the files written."""
    before = _load(Path(base)) if base is not None else {}
    loaded = [(Path(s), _load(Path(s))) for s in sources]
    modules = sorted({m for _, found in loaded for m in found})
    written = []
    for module in modules:
        copies = [(d, found[module]) for d, found in loaded if module in found]
        header = {(b.interval_s, b.clock) for _, b in copies}
        if len(header) > 1:
            shown = ", ".join(f"{d}: {b.interval_s} s {b.clock}" for d, b in copies)
            raise BaselineMergeError(
                f"module {module}: saved with different intervals or clocks ({shown})"
            )
        original = before.get(module)
        tests: dict[str, TestEntry] = {}
        for nodeid in sorted({n for _, b in copies for n in b.tests}):
            tests[nodeid] = _pick(nodeid, copies, original.tests.get(nodeid) if original else None)
        interval, clock = header.pop()
        repeat = max(b.repeat for _, b in copies)
        merged = ModuleBaseline(module, interval, clock, repeat, tests)
        written.append(baseline_store.write(output, merged))
    return written


def _pick(
    nodeid: str, copies: list[tuple[Path, ModuleBaseline]], original: TestEntry | None
) -> TestEntry:
    versions = [(d, b.tests[nodeid]) for d, b in copies if nodeid in b.tests]
    changed = [(d, e) for d, e in versions if e != original] if original else versions
    distinct: list[tuple[Path, TestEntry]] = []
    for d, entry in changed:
        if all(entry != e for _, e in distinct):
            distinct.append((d, entry))
    if not distinct:
        return original if original is not None else versions[0][1]
    if len(distinct) > 1:
        where = " and ".join(str(d) for d, _ in distinct)
        hint = "" if original else " (give --base, the baselines the shards started from)"
        raise BaselineMergeError(
            f"{nodeid}: saved differently in {where}: a test must be saved by one shard{hint}"
        )
    return distinct[0][1]


__all__ = ["BaselineError", "BaselineMergeError", "merge_dirs"]
