"""The child side of --profile-subprocesses: a Python process started by a profiled test
profiles itself and leaves its profile in the test's spool directory (child_profiles.py reads it).

How a child gets here:
- a new interpreter (subprocess, multiprocessing spawn): the parent puts child_site/ first on
  PYTHONPATH; its sitecustomize.py calls `start_from_env()`, which reads the settings in ENV.
- a fork() child (multiprocessing fork, os.fork): `after_fork_in_child()` (a fork hook,
  through core/after_fork.py) starts a new agent when the forking process was profiling a
  test at that moment.
The agent samples CPU (CpuSampler) and, when the allocator shim is in the process, memory
(MemorySampler) into a fresh TestProfile: a fork child never reports the copy of its parent's
profile, so nothing is charged twice. Its profile is written atomically when the process ends:
at interpreter exit (atexit), at os._exit (multiprocessing's fork children leave that way) and
at SIGTERM when no one else handles it (Pool.terminate); a `.running` marker written at the
start and removed then lets the parent count children that died without reporting.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

from ..core.after_fork import run_in_fork_child

ENV = "PYTEST_SCALENE_CHILD"  # JSON ChildSettings, set only while a profiled test runs
RUNNING = ".running"
# Long-lived helpers multiprocessing starts on first use: not the test's work, and they would
# outlive it. Their command lines (python -c ...) name them.
_INFRASTRUCTURE = ("multiprocessing.resource_tracker", "multiprocessing.forkserver")
_SAMPLER_CLASSES = ("CpuSampler", "MemorySampler")
_real_exit = os._exit
_getsignal = signal.getsignal  # bound at import: signal_guard wraps the module's during tests
_signal = signal.signal


class ChildSettings(NamedTuple):
    spool: str  # the test's spool directory
    rootdir: str
    interval_s: float
    clock: str
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    memory_threshold: int = 0  # 0: no memory profiling in children

    def to_env(self) -> str:
        return json.dumps(self._asdict())

    @classmethod
    def from_env(cls, text: str) -> ChildSettings:
        data = json.loads(text)
        return cls(
            spool=str(data["spool"]),
            rootdir=str(data["rootdir"]),
            interval_s=float(data["interval_s"]),
            clock=str(data["clock"]),
            include=tuple(str(g) for g in data.get("include", [])),
            exclude=tuple(str(g) for g in data.get("exclude", [])),
            memory_threshold=int(data.get("memory_threshold", 0)),
        )


class ChildAgent:
    """Profiles this whole process (from its start or its fork) into one TestProfile."""

    def __init__(self, settings: ChildSettings, scope: Any = None) -> None:
        from ..core.model import TestProfile

        self.settings = settings
        self.scope = scope  # a CodeScope for these settings (the parent's, in a fork child)
        self.pid = os.getpid()
        self.name = f"{self.pid}-{os.urandom(4).hex()}"
        self.profile = TestProfile(f"child process {self.pid}")
        self.notes: list[str] = []
        self._cpu: Any = None
        self._guard: Any = None
        self._memory: Any = None
        self._begin = time.perf_counter()
        self._done = False

    @property
    def marker(self) -> Path:
        return Path(self.settings.spool, self.name + RUNNING)

    def note(self, message: str) -> None:
        if message not in self.notes:
            self.notes.append(message)

    def start(self) -> None:
        """Raises OSError when the spool is gone (the test is over): then nothing runs."""
        self.marker.touch(exist_ok=False)
        try:
            self._start_samplers()
        except BaseException:
            self.marker.unlink(missing_ok=True)
            raise

    def _start_samplers(self) -> None:
        from ..sampling.cpu_sampler import CpuSampler
        from ..sampling.held_signal import SignalBusy
        from ..sampling.scope import CodeScope

        settings = self.settings
        if self.scope is None:  # a new interpreter: sysconfig's paths cost it ~40 ms
            self.scope = CodeScope(settings.rootdir, settings.include, settings.exclude)
        scope = self.scope
        if settings.memory_threshold > 0:
            self._start_memory(scope)
        sampler = CpuSampler(scope, settings.interval_s, settings.clock, on_error=self._cpu_error)
        try:
            sampler.start(self.profile)
        except SignalBusy as exc:
            self.note(f"a child process was not CPU-sampled: {exc}")
            return
        self._cpu = sampler
        self._guard_signals(sampler)

    def _guard_signals(self, sampler: Any) -> None:
        """As around a test: the child's own use of the sampler's signal or timer wins."""
        try:
            from ..sampling.signal_guard import SignalGuard

            self._guard = SignalGuard(sampler, self._stepped_aside)
            self._guard.apply()
        except Exception as exc:  # sampling goes on unguarded
            self.note(f"a child process's signals were not guarded: {exc!r}")

    def _stepped_aside(self, reason: str) -> None:
        self.note(f"a child process: {reason.replace('the test', 'it')} (its CPU is partial)")

    def _start_memory(self, scope: Any) -> None:
        try:
            from .. import _native

            if not _native.shim_loaded():
                return
            from ..sampling.memory_sampler import MemorySampler  # imports pytest: only when needed

            sampler = MemorySampler(scope, self.settings.memory_threshold, self.note)
            sampler.start_test(self.profile)
            self._memory = sampler
        except Exception as exc:
            self.note(f"a child process's memory was not profiled: {exc!r}")

    def _cpu_error(self, exc: BaseException) -> None:
        self.note(f"a child process's CPU sampler stopped after an internal error: {exc!r}")

    def finish(self, write: bool = True) -> None:
        """Stop sampling and (if `write`) leave the profile in the spool. Once per process."""
        if self._done or os.getpid() != self.pid:
            return
        self._done = True
        if self._guard is not None:
            self._guard.undo()
        if self._cpu is not None:
            try:
                self._cpu.stop()
            except Exception as exc:
                self.note(f"a child process's CPU sampler failed at exit: {exc!r}")
        if self._memory is not None:
            try:
                self._memory.stop_test(self.profile)
            except Exception as exc:
                self.note(f"a child process's memory sampler failed at exit: {exc!r}")
        self.profile.elapsed_s = time.perf_counter() - self._begin
        try:
            if write and self.marker.parent.is_dir():  # else the test is over: nobody reads it
                self._write()
        finally:
            self.marker.unlink(missing_ok=True)

    def _write(self) -> None:
        from ..core.atomic_write import write_text_atomic
        from ..core.codec import test_to_dict

        payload = {"pid": self.pid, "notes": self.notes, "profile": test_to_dict(self.profile)}
        # No fsync: the parent reads it at once; only a machine crash could lose it.
        path = Path(self.settings.spool, self.name + ".json")
        write_text_atomic(path, json.dumps(payload), durable=False)

    def abandon(self) -> None:
        """In a fork() child of this agent's process: the copy is not the child's to report."""
        self._done = True
        if self._cpu is not None and hasattr(self._cpu, "abandon"):
            self._cpu.abandon()


_agent: ChildAgent | None = None
_fork_settings: ChildSettings | None = None  # what a fork() child of this process runs with
_fork_scope: Any = None  # and the CodeScope it reuses
_hooks_installed = False
_finishing = False
_deferred_signal: int | None = None  # a SIGTERM that came while the profile was being written


def set_fork_settings(settings: ChildSettings | None, scope: Any = None) -> None:
    """The profiled test's settings while it runs (None after): fork children use them, with
    `scope` (the profiler's CodeScope, built for the same settings)."""
    global _fork_settings, _fork_scope
    _fork_settings, _fork_scope = settings, scope
    install_fork_hook()


def install_fork_hook() -> None:
    """Once per process. Without --profile-subprocesses too: a fork() child always gives back
    the signals of the samplers it inherited (a copy's handler would change what they do)."""
    global _hooks_installed
    if not _hooks_installed:
        _hooks_installed = True
        run_in_fork_child(after_fork_in_child)


def _start(settings: ChildSettings, scope: Any = None) -> None:
    global _agent, _fork_settings, _fork_scope
    agent = ChildAgent(settings, scope)
    try:
        agent.start()
    except OSError:
        return  # the spool is gone: the test that started us is over
    _agent, _fork_settings, _fork_scope = agent, settings, agent.scope
    install_fork_hook()
    _install_exit_hooks()


def start_from_env() -> None:
    """sitecustomize's entry point. Never raises: a child must run as it would unprofiled."""
    text = os.environ.get(ENV)
    if not text or _agent is not None:
        return
    command = " ".join(getattr(sys, "orig_argv", []))
    if any(name in command for name in _INFRASTRUCTURE):
        return
    try:
        _start(ChildSettings.from_env(text))
    except Exception as exc:
        print(f"pytest-scalene: child process not profiled: {exc!r}", file=sys.stderr)


def _release_inherited_signals() -> None:
    """Give back the signals that the parent's samplers held: their handlers are copies."""
    for signum in signal.valid_signals():
        try:
            owner = getattr(_getsignal(signum), "__self__", None)
            if type(owner).__name__ in _SAMPLER_CLASSES and type(owner).__module__.startswith(
                "pytest_scalene."
            ):
                _signal(signum, signal.SIG_DFL)
        except (OSError, ValueError, TypeError):
            continue


def after_fork_in_child() -> None:
    global _agent, _finishing, _deferred_signal
    inherited, _agent = _agent, None
    _finishing, _deferred_signal = False, None
    try:
        if inherited is not None:
            inherited.abandon()
        _release_inherited_signals()
        if _fork_settings is not None:
            _start(_fork_settings, _fork_scope)
    except Exception as exc:  # never break the child
        print(f"pytest-scalene: forked child not profiled: {exc!r}", file=sys.stderr)


def stop_for_nested_pytest() -> None:
    """A pytest session starting in a profiled child profiles itself (if asked): the agent
    stops without reporting, so that the two never compete for the signals or the shim."""
    global _agent, _fork_settings, _fork_scope
    agent = _agent
    if agent is not None:  # only in a profiled child, not in a pytest run in-process
        _agent = _fork_settings = _fork_scope = None
        agent.finish(write=False)


# -- the ways a process ends -----------------------------------------------------------------
def finish_current() -> None:
    global _finishing
    agent = _agent
    if agent is None or _finishing:
        return
    _finishing = True
    try:
        agent.finish()
    except Exception as exc:
        print(f"pytest-scalene: child profile not written: {exc!r}", file=sys.stderr)
    finally:
        _finishing = False
    if _deferred_signal is not None:
        _die(_deferred_signal)


def _exit_now(status: int) -> None:
    finish_current()
    _real_exit(status)


def _die(signum: int) -> None:
    _signal(signum, signal.SIG_DFL)  # die of it, as without us
    os.kill(os.getpid(), signum)


def _on_sigterm(signum: int, frame: Any) -> None:
    global _deferred_signal
    if _finishing:  # e.g. Pool.terminate() while a worker writes at its normal exit
        _deferred_signal = signum
        return
    finish_current()
    _die(signum)


def _install_exit_hooks() -> None:
    atexit.register(finish_current)
    os._exit = _exit_now  # idempotent: the same function each time
    try:
        if _getsignal(signal.SIGTERM) in (signal.SIG_DFL, _on_sigterm):
            _signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread
        pass
