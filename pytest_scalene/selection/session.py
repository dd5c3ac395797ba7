"""Test selection in a pytest session (docs/selection.md): records each profiled test's code
map, stores it beside the baselines, and before the A/B comparison or the instruction counts
decides which tests are measured. A test not measured still runs, unprofiled."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from ..ab.session import Setup
from ..config.history_options import HistoryOptions
from ..config.options import GateOptions
from ..gates.budgets import MARKER
from ..history.connect import open_store
from ..history.store import HistoryError
from ..sampling.code_seen import CodeSeen
from ..sampling.profiler import Profiler
from .code_map import FILE_NAME, CodeMap, CodeMapError, load, save
from .decide import git_tree, why_measured, working_tree
from .prepass import RECORD_ENV, record_at_ref
from .recording import Recorder, recording_wanted

WORKER_OUTPUT_KEY = "pytest_scalene_code_map"  # an xdist worker's map, in its workeroutput


class Selection:
    def __init__(self, config: pytest.Config, profiler: Profiler, options: GateOptions) -> None:
        self.config = config
        self.profiler = profiler
        self.options = options
        self.rootdir = Path(config.rootpath)
        self.path = options.baseline_dir / FILE_NAME
        self.active = (
            options.select == "changed"
            and not options.save_baseline  # a baseline needs every test measured
            and bool(options.compare_ref or options.measure == "instructions" and options.compare)
        )
        self.recorder: Recorder | None = None
        self.notes: list[str] = []
        self.measured: dict[str, str] = {}  # nodeid -> why
        self.unchanged: list[str] = []
        self._received: list[CodeMap] = []  # xdist workers' maps
        self._prepass: CodeMap | None = None  # recorded at REF when none was stored
        # The pre-pass session at REF (prepass.py): record every test, write the map there.
        self.record_to = os.environ.pop(RECORD_ENV, None)
        if (profiler.options.enabled or self.record_to) and recording_wanted():
            seen = CodeSeen()
            if seen.problem is None:
                self.recorder = Recorder(str(config.rootpath), seen)
            else:
                self.notes.append(f"code map not recorded: {seen.problem}")

    # -- before the tests ------------------------------------------------------------------------
    def decide(self, items: list[pytest.Item], ab: Setup | None) -> None:
        """`ab`: the A/B comparison's setup (REF's tree decides too)."""
        if not self.active:
            return
        wanted = [item for item in items if self.profiler.wants(item)]
        code_map = self._stored(ab is not None and bool(wanted))
        if code_map is None and ab is not None and wanted:
            code_map, problem = record_at_ref(ab, [item.nodeid for item in wanted])
            self._prepass = code_map
            self.notes.append(problem or f"the code map was recorded at {ab.ref} first")
        if code_map is None:
            self.measured = {item.nodeid: "no code map" for item in wanted}
            self.profiler.session.selection = self.to_dict()
            return
        trees = [working_tree(self.rootdir)]
        if ab is not None:
            name = f"{ab.ref} ({ab.commit[:12]})"
            trees.append(git_tree(ab.root, self.rootdir, ab.commit, name))
        for item in wanted:
            why = why_measured(code_map, item.nodeid, trees)
            if why is None and item.get_closest_marker(MARKER) is not None:
                why = "a perf_budget marker: always measured"
            if why is None:
                self.unchanged.append(item.nodeid)
            else:
                self.measured[item.nodeid] = why
        self.profiler.not_measured.update(self.unchanged)
        self.profiler.session.selection = self.to_dict()

    def _stored(self, record_at_ref: bool) -> CodeMap | None:
        """The stored map; `record_at_ref`: when there is none, the A/B pre-pass makes one."""
        try:
            found = load(self.path)
        except CodeMapError as exc:
            self.notes.append(f"{exc}: every test is measured")
            return None
        if found is None:
            found = self._from_history()
        if found is None and not record_at_ref:
            self.notes.append(
                f"no code map at {self.path}: every test is measured (a run that saves "
                "baselines, or an A/B run, stores one)"
            )
        return found

    def _from_history(self) -> CodeMap | None:
        """With --profile-history and no map file: the history's newest run's map."""
        url = HistoryOptions.from_config(self.config).url
        if not url:
            return None
        try:
            with open_store(url) as store:
                text = store.latest_code_map()
            found = None if text is None else CodeMap.from_json(text, "the history's map")
        except (HistoryError, CodeMapError) as exc:
            self.notes.append(f"the history's code map could not be read: {exc}")
            return None
        if found is not None:
            self.notes.append("the code map of the history's newest run decides")
        return found

    def to_dict(self) -> dict[str, Any]:
        return {
            "measured": dict(sorted(self.measured.items())),
            "unchanged": sorted(self.unchanged),
            "note": "; ".join(self.notes) or None,
        }

    # -- each test -------------------------------------------------------------------------------
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: Any) -> Any:
        recorder = self.recorder
        if recorder is None or not (self.record_to or self.profiler.wants(item)):
            return (yield)
        recorder.start()
        try:
            return (yield)
        finally:
            try:
                recorder.stop(item)
            except Exception as exc:  # the map is an aid: a bug here must not fail the test
                self.recorder = None
                self.profiler.note(f"code map recording stopped after an internal error: {exc!r}")

    # -- the end ---------------------------------------------------------------------------------
    def recorded(self) -> CodeMap | None:
        maps = [self._prepass] if self._prepass is not None else []
        maps += [self.recorder.code_map()] if self.recorder and self.recorder.tests else []
        maps += self._received
        if not maps:
            return None
        merged = maps[0]
        for other in maps[1:]:
            merged = merged.merged(other)
        return merged

    def save(self) -> None:
        """After a baseline save or an A/B run: this run's maps join the stored one."""
        if self.record_to:
            found = self.recorded()
            if found is not None:
                save(Path(self.record_to), found)
            return
        if not (self.options.save_baseline or self.options.compare_ref):
            return
        new = self.recorded()
        if new is None:
            return
        try:
            old = load(self.path)
        except CodeMapError:
            old = None  # replaced: the decision already said it could not be read
        merged = new if old is None else old.merged(new)
        if old is None or merged.to_json() != old.to_json():
            save(self.path, merged)

    def send(self, config: pytest.Config) -> None:
        """On an xdist worker: its map goes to the controller."""
        found = self.recorder.code_map() if self.recorder and self.recorder.tests else None
        if found is not None:
            config.workeroutput[WORKER_OUTPUT_KEY] = found.to_json()  # type: ignore[attr-defined]

    def receive(self, output: dict[str, Any]) -> None:
        text = output.get(WORKER_OUTPUT_KEY)
        if text:
            self._received.append(CodeMap.from_json(text, "an xdist worker's code map"))

    def reasons(self) -> list[str]:
        """Why each test was measured, when the map had a say."""
        return [
            f"{nodeid}: measured: {why}"
            for nodeid, why in sorted(self.measured.items())
            if why != "no code map"
        ]

    def summary(self) -> list[str]:
        if not self.active:
            return []
        lines = list(self.notes)
        if self.unchanged or self.measured:
            lines.append(
                f"{len(self.unchanged)} test(s) unchanged since the code map were not measured; "
                f"{len(self.measured)} measured (--profile-select=all measures every test)"
            )
        return lines
