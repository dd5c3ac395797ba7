"""The stored baseline entry each compared test was judged against (--profile-compare), read
back for the reports: the Markdown summary's lines behind a regressed total (the test's lines
paired with the baseline's as the comparison pairs them, gates/line_matching.py, those whose
metric grew most) and the HTML page's per-line diffs (html_data.py)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..core import extra_keys
from ..core.model import TestProfile
from ..core.source import source_path
from ..gates import baseline_store
from ..gates.baseline_entry import entry_from_profile
from ..gates.line_matching import match_lines

MAX_LINES = 5  # lines per regressed metric


@dataclass(frozen=True)
class Grown:
    file: str
    line: int
    function: str
    metric: str
    before: float | None  # None: the baseline has no such figure at this line (a new line)
    after: float


class Baselines:
    """The run's baseline files, each read once: a regression at 2,000 tests reads one file per
    test module, not one per test."""

    def __init__(self, rootdir: str) -> None:
        self.rootdir = rootdir
        self._read: dict[str, baseline_store.ModuleBaseline | None] = {}

    def entry(self, profile: TestProfile) -> baseline_store.TestEntry | None:
        found = profile.extra.get(extra_keys.BASELINE)
        file = found.get("file") if isinstance(found, dict) else None
        if not isinstance(file, str) or not file:
            return None
        path = source_path(self.rootdir, file)
        if path not in self._read:
            try:
                self._read[path] = baseline_store.read(path) if os.path.isfile(path) else None
            except (baseline_store.BaselineError, OSError):
                self._read[path] = None  # the comparison said why; the summary goes on
        stored = self._read[path]
        return stored.tests.get(profile.nodeid) if stored is not None else None

    def grown(self, profile: TestProfile, metrics: list[str]) -> list[Grown]:
        """Per metric of `metrics`, the (at most MAX_LINES) lines whose figure grew most from
        the baseline to this run, new lines counting from 0; [] without a baseline entry."""
        entry = self.entry(profile)
        if entry is None:
            return []
        current = entry_from_profile(profile, self.rootdir)
        pairs, _, new, _ = match_lines(entry.lines, current.lines)
        paired = [(b.metrics, c) for b, c in pairs] + [({}, c) for c in new]
        out: list[Grown] = []
        for metric in metrics:
            found = [
                Grown(c.file, c.line, c.function, metric, was.get(metric), now)
                for was, c in paired
                if (now := c.metrics.get(metric)) is not None and now > (was.get(metric) or 0.0)
            ]
            found.sort(key=lambda g: ((g.before or 0.0) - g.after, g.file, g.line))
            out += found[:MAX_LINES]
        return out
