"""The parent side of --profile-subprocesses: a Collector that, around each profiled test,
lets the test's Python child processes profile themselves, then charges their lines to it.

While the test runs, the environment its children inherit names a fresh spool directory and
the profiling settings (child_agent.ENV), puts child_site/ first on PYTHONPATH (its
sitecustomize starts the child's agent) and, when the allocator shim is in this process, puts
the shim first on LD_PRELOAD. fork() children get the settings through child_agent directly.
After the call, each child's profile file is merged into the test's profile:
- lines: added to the test's lines (same keys); CPU times and samples add up; of the memory
  figures, alloc_mb and wait_s add up, the others take the larger value.
- totals: the test's CPU totals include its children's, so that a line's share is of all the
  CPU the test caused and CPU budgets and baselines see work moved into a child. `children`
  (profiles merged), `children_cpu_s` (their CPU within the totals; the test's own is the rest),
  `children_peak_mb` (the largest child peak) and `children_lost` (children that never
  reported: still running after the call, killed by a signal, crashed) say how much.
Afterwards the environment is as before (entries a test added itself are kept).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..core import extra_keys, runenv
from ..core.model import LineStats, TestProfile
from ..core.natural_values import is_number
from . import child_agent

SITE_DIR = str(Path(__file__).resolve().parent / "site")
SUMMED_EXTRAS = ("alloc_mb", "wait_s")


def merge_line(target: LineStats, child: LineStats) -> None:
    target.cpu_python_s += child.cpu_python_s
    target.cpu_native_s += child.cpu_native_s
    target.cpu_system_s += child.cpu_system_s
    target.samples += child.samples
    for name, value in child.extra.items():
        mine = target.extra.get(name)
        if mine is None:
            target.extra[name] = value
        elif is_number(mine) and is_number(value):
            target.extra[name] = mine + value if name in SUMMED_EXTRAS else max(mine, value)


def merge_child(profile: TestProfile, child: TestProfile) -> None:
    """Charge one child's profile to the test (module doc)."""
    profile.cpu_python_s += child.cpu_python_s
    profile.cpu_native_s += child.cpu_native_s
    profile.cpu_system_s += child.cpu_system_s
    for key, stats in child.lines.items():
        merge_line(profile.line(key, stats.function_line), stats)
    extra = profile.extra
    extra[extra_keys.CHILDREN] = extra.get(extra_keys.CHILDREN, 0) + 1
    extra[extra_keys.CHILDREN_CPU_S] = extra.get(extra_keys.CHILDREN_CPU_S, 0.0) + child.cpu_s
    peak = child.extra.get(extra_keys.PEAK_MB)
    if is_number(peak):
        extra[extra_keys.CHILDREN_PEAK_MB] = max(extra.get(extra_keys.CHILDREN_PEAK_MB, 0.0), peak)


class _EnvEntry:
    """One variable's entry put first while a test runs, taken out again after it."""

    def __init__(self, name: str, entry: str, sep: str) -> None:
        self.name, self.entry, self.sep = name, entry, sep
        self._original: str | None = None
        self._set: str | None = None

    def apply(self) -> None:
        self._original = current = os.environ.get(self.name)
        self._set = f"{self.entry}{self.sep}{current}" if current else self.entry
        os.environ[self.name] = self._set

    def undo(self) -> None:
        current = os.environ.get(self.name)
        if current == self._set:
            if self._original is None:
                os.environ.pop(self.name, None)
            else:
                os.environ[self.name] = self._original
        elif current is not None:  # the test changed it: take out only our entry
            parts = current.split(self.sep)
            if self.entry in parts:
                parts.remove(self.entry)
                os.environ[self.name] = self.sep.join(parts)


class ChildProfiles:
    """The Collector (profiler.Collector) for --profile-subprocesses."""

    def __init__(self, profiler: Any) -> None:
        self.profiler = profiler
        self.root = Path(tempfile.mkdtemp(prefix="pytest-scalene-children-"))
        memory = profiler.options.memory != "no" and runenv.shim_loaded()
        shim = runenv.shim_path() if memory else None
        self.memory_threshold = profiler.options.memory_threshold if shim else 0
        self.entries = [_EnvEntry("PYTHONPATH", SITE_DIR, os.pathsep)]
        if shim is not None:
            self.entries.append(_EnvEntry("LD_PRELOAD", str(shim), ":"))
        self._spool: Path | None = None

    def start_test(self, profile: TestProfile) -> None:
        options = self.profiler.options
        self._spool = spool = Path(tempfile.mkdtemp(prefix="test-", dir=self.root))
        settings = child_agent.ChildSettings(
            spool=str(spool),
            rootdir=self.profiler.scope.rootdir,
            interval_s=options.interval_s,
            clock=options.clock,
            include=tuple(options.include),
            exclude=tuple(options.exclude),
            memory_threshold=self.memory_threshold,
        )
        os.environ[child_agent.ENV] = settings.to_env()
        for entry in self.entries:
            entry.apply()
        child_agent.set_fork_settings(settings, self.profiler.scope)

    def stop_test(self, profile: TestProfile) -> None:
        child_agent.set_fork_settings(None)
        os.environ.pop(child_agent.ENV, None)
        for entry in reversed(self.entries):
            entry.undo()
        spool, self._spool = self._spool, None
        if spool is not None:
            try:
                self._merge(spool, profile)
            finally:
                shutil.rmtree(spool, ignore_errors=True)

    def _merge(self, spool: Path, profile: TestProfile) -> None:
        from ..core.codec import profile_from_dict  # only where children were profiled

        for path in sorted(spool.glob("*.json")):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                child = profile_from_dict(profile.nodeid, data["profile"])
                notes = [str(note) for note in data.get("notes", [])]
                # A dry run: a wrongly typed figure raises here, before the test is touched.
                merge_child(TestProfile(profile.nodeid), child)
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                self.profiler.note(f"a child process's profile {path.name} was unreadable: {exc}")
                continue
            merge_child(profile, child)
            for note in notes:
                self.profiler.note(note)
        lost = len(list(spool.glob("*" + child_agent.RUNNING)))
        if lost:
            profile.extra[extra_keys.CHILDREN_LOST] = (
                profile.extra.get(extra_keys.CHILDREN_LOST, 0) + lost
            )
            self.profiler.note(
                f"{profile.nodeid}: {lost} child process(es) had not reported when the test's"
                " call ended (still running, killed by a signal, or crashed): their lines are"
                " missing"
            )

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def attach(profiler: Any, add_cleanup: Callable[[Callable[[], None]], None]) -> None:
    """With --profile-subprocesses: profile the children of every profiled test. The collector
    goes first, so that it stops last: children are merged after the test's own figures."""
    child_agent.install_fork_hook()
    if not profiler.options.subprocesses:
        return
    collector = ChildProfiles(profiler)
    profiler.collectors.insert(0, collector)
    add_cleanup(collector.close)
