"""Test selection in a pytest session (docs/selection.md): records each profiled test's code
map, stores it beside the baselines, and before the A/B comparison or the instruction counts
decides which tests are measured. A test not measured still runs, unprofiled.

The code map's machinery (the map, its digests, the recorder, the decision) is imported where a
session records, reads or receives a map: every profiling session builds a Selection, most use
none of it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..config.history_options import HistoryOptions
from ..config.options import CODE_MAP_FILE, GateOptions
from ..core.runenv import RECORD_ENV, has_marker
from ..gates.budgets import MARKER
from ..sampling.profiler import Profiler

if TYPE_CHECKING:
    from ..compare_ref.ab_run import Setup  # imported where --profile-compare-ref runs
    from .code_map import CodeMap
    from .recording import Recorder
    from .stored import StoredMap

WORKER_OUTPUT_KEY = "pytest_scalene_code_map"  # an xdist worker's map, in its workeroutput


class Selection:
    def __init__(self, config: pytest.Config, profiler: Profiler, options: GateOptions) -> None:
        self.config = config
        self.profiler = profiler
        self.options = options
        self.rootdir = Path(config.rootpath)
        self.path = options.baseline_dir / CODE_MAP_FILE
        self.history_url = HistoryOptions.from_config(config).url
        self._stored: StoredMap | None = None
        self.active = (
            options.select == "changed"
            and not options.save_baseline  # a baseline needs every test measured
            and bool(options.compare_ref or options.measure == "instructions" and options.compare)
        )
        self.recorder: Recorder | None = None
        self.notes: list[str] = []
        self.measured: dict[str, str] = {}  # nodeid -> why
        self.unchanged: list[str] = []
        self.fresh: set[str] = set()  # tests whose stored map entry holds: not recorded again
        self._received: list[CodeMap] = []  # xdist workers' maps
        self._prepass: CodeMap | None = None  # recorded at REF when none was stored
        # The pre-pass session at REF (prepass.py): record every test, write the map there.
        self.record_to = os.environ.pop(RECORD_ENV, None)
        # Only a run that stores the map records it.
        storing = options.save_baseline or options.compare_ref or self.history_url
        if profiler.options.enabled and storing or self.record_to:
            self._start_recorder()

    def _start_recorder(self) -> None:
        from ..sampling.code_seen import CodeSeen
        from .recording import Recorder, recording_wanted

        if not recording_wanted():
            return
        seen = CodeSeen()
        if seen.problem is None:
            self.recorder = Recorder(str(self.config.rootpath), seen)
        else:
            self.notes.append(f"code map not recorded: {seen.problem}")

    @property
    def stored(self) -> StoredMap:
        """The stored map (beside the baselines, or in the history), read at its first use."""
        if self._stored is None:
            from .stored import StoredMap

            self._stored = StoredMap(self.path, self.history_url)
        return self._stored

    # -- before the tests ------------------------------------------------------------------------
    def after_collection(self, items: list[pytest.Item], ab: Setup | None) -> None:
        """Which tests to record (those whose stored entry no longer holds) and, for the costly
        gates, which to measure. `ab`: the A/B comparison's setup (REF's tree decides too)."""
        if self.recorder is None and not self.active:
            return
        from .decide import why_measured, working_tree

        wanted = [item for item in items if self.profiler.wants(item)]
        if self.recorder is not None and not self.record_to:
            stored, tree = self.stored.get(), working_tree(self.rootdir)
            if stored is not None:
                self.fresh = {
                    i.nodeid for i in wanted if not why_measured(stored, i.nodeid, [tree])
                }
        if self.active:
            self._decide(wanted, ab)

    def _decide(self, wanted: list[pytest.Item], ab: Setup | None) -> None:
        from .decide import git_tree, why_measured, working_tree

        code_map = self.stored.get()
        if self.stored.problem is not None:
            self.notes.append(f"{self.stored.problem}: every test is measured")
        elif code_map is None and ab is not None and wanted:
            from .prepass import record_at_ref

            code_map, problem = record_at_ref(ab, [item.nodeid for item in wanted])
            self._prepass = code_map
            self.notes.append(problem or f"the code map was recorded at {ab.ref} first")
        elif code_map is None:
            self.notes.append(
                f"no code map at {self.path}: every test is measured (a run that saves "
                "baselines, or an A/B run, stores one)"
            )
        elif not self.stored.source.endswith(CODE_MAP_FILE):
            self.notes.append(f"the code map of {self.stored.source} decides")
        if code_map is None:
            self.measured = {item.nodeid: "no code map" for item in wanted}
            self.profiler.session.selection = self.to_dict()
            return
        trees = [working_tree(self.rootdir)]
        if ab is not None:
            name = f"{ab.ref} ({ab.commit[:12]})"
            trees.append(git_tree(ab.root, self.rootdir, ab.commit, name))
        try:
            for item in wanted:
                why = why_measured(code_map, item.nodeid, trees)
                if why is None and has_marker(item) and item.get_closest_marker(MARKER) is not None:
                    why = "a perf_budget marker: always measured"
                if why is None:
                    self.unchanged.append(item.nodeid)
                else:
                    self.measured[item.nodeid] = why
        finally:
            for tree in trees:
                tree.close()
        self.profiler.not_measured.update(self.unchanged)
        self.profiler.session.selection = self.to_dict()

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
        if recorder is None:
            return (yield)
        recorded = item.nodeid not in self.fresh and (self.record_to or self.profiler.wants(item))
        if recorded:
            recorder.start()
        try:
            return (yield)
        finally:
            try:
                if recorded:
                    recorder.stop(item)
                else:  # what first ran in it is still noted (sampling/code_seen.py)
                    recorder.between_tests()
            except Exception as exc:  # the map is an aid: a bug here must not fail the test
                self.recorder = None
                self.profiler.note(f"code map recording stopped after an internal error: {exc!r}")

    # -- the end ---------------------------------------------------------------------------------
    def recorded(self) -> CodeMap | None:
        """This run's maps joined with the stored one (entries of tests it did not record are
        kept while they hold): what is stored beside the baselines and in the history."""
        maps = [self._prepass] if self._prepass is not None else []
        maps += [self.recorder.code_map()] if self.recorder and self.recorder.tests else []
        maps += self._received
        if not maps:
            return None
        stored = None if self.record_to else self.stored.get()
        merged = stored if stored is not None else maps.pop(0)
        for other in maps:
            merged = merged.merged(other)
        from .code_map import built_only  # the map's machinery is loaded by now

        return built_only(merged, self.config.rootpath)

    def save(self) -> None:
        """After a baseline save or an A/B run: this run's maps join the stored one."""
        found = self.recorded()
        if found is None:
            return
        from .code_map import save

        if self.record_to:
            save(Path(self.record_to), found)
        elif self.options.save_baseline or self.options.compare_ref:
            save(self.path, found)  # a corrupt one is replaced: the decision said so

    def send(self, config: pytest.Config) -> None:
        """On an xdist worker: its map goes to the controller."""
        found = self.recorder.code_map() if self.recorder and self.recorder.tests else None
        if found is not None:
            config.workeroutput[WORKER_OUTPUT_KEY] = found.to_json()  # type: ignore[attr-defined]

    def receive(self, output: dict[str, Any]) -> None:
        text = output.get(WORKER_OUTPUT_KEY)
        if text:
            from .code_map import CodeMap

            self._received.append(CodeMap.from_json(text, "an xdist worker's code map"))

    def reasons(self) -> list[str]:
        """Why each test was measured, when the map had a say."""
        return [
            f"{nodeid}: measured: {why}"
            for nodeid, why in sorted(self.measured.items())
            if why != "no code map"
        ]

    def summary(self) -> list[str]:
        lines = []
        storing = self.options.save_baseline or self.options.compare_ref
        if self.recorder is not None and storing and not self.record_to:
            lines.append(
                f"code map {self.path}: {len(self.recorder.tests)} test(s) recorded, "
                f"{len(self.fresh)} unchanged since it was stored"
            )
        if not self.active:
            return lines
        lines += self.notes
        if self.unchanged or self.measured:
            lines.append(
                f"{len(self.unchanged)} test(s) unchanged since the code map were not measured; "
                f"{len(self.measured)} measured (--profile-select=all measures every test)"
            )
        return lines
