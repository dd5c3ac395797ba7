"""The profilers compared, as commands around one pytest run, and one measured run.

Every tool runs the same `python -m pytest <target>` on the bench venv's interpreter, with
plugin autoload off and pytest-scalene loaded (inactive unless --profile), so that the only
difference between a tool's run and the unprofiled run is the tool.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

WORKLOADS = Path(__file__).resolve().parent / "workloads"


@dataclass(frozen=True)
class Context:
    python: str
    bin_dir: Path
    out_dir: Path


Builder = Callable[[Context, list[str], Path], list[str]]


@dataclass(frozen=True)
class Tool:
    key: str
    label: str
    needs: str | None  # the distribution it needs, None for the stdlib/this project
    suffix: str  # its output file's suffix
    build: Builder
    note: str = ""
    preload_shim: bool = False  # start with the allocator shim on LD_PRELOAD (no re-exec)


def pytest_args(target: list[str]) -> list[str]:
    return ["-m", "pytest", "-q", "-p", "pytest_scalene.plugin", *target]


def _plain(ctx: Context, target: list[str], out: Path) -> list[str]:
    return [ctx.python, *pytest_args(target)]


def _ours(*extra: str) -> Builder:
    def build(ctx: Context, target: list[str], out: Path) -> list[str]:
        return [ctx.python, *pytest_args(target), "--profile", *extra, "--profile-json", str(out)]

    return build


def _scalene(*extra: str) -> Builder:
    def build(ctx: Context, target: list[str], out: Path) -> list[str]:
        # --program-path: without it Scalene profiles only pytest's own __main__ (empty profile).
        return [
            ctx.python, "-m", "scalene", "run", *extra, "-o", str(out),
            "--program-path", str(WORKLOADS), *pytest_args(target),
        ]  # fmt: skip

    return build


def _memray(ctx: Context, target: list[str], out: Path) -> list[str]:
    return [ctx.python, "-m", "memray", "run", "-q", "-f", "-o", str(out), *pytest_args(target)]


def _pytest_memray(ctx: Context, target: list[str], out: Path) -> list[str]:
    return [ctx.python, *pytest_args(target), "-p", "pytest_memray.plugin", "--memray",
            "--memray-bin-path", str(out)]  # fmt: skip


def _py_spy(ctx: Context, target: list[str], out: Path) -> list[str]:
    record = ["record", "--nonblocking", "--rate", "100", "--format", "raw", "--output", str(out)]
    return [str(ctx.bin_dir / "py-spy"), *record, "--", ctx.python, *pytest_args(target)]


def _pyinstrument(ctx: Context, target: list[str], out: Path) -> list[str]:
    return [ctx.python, "-m", "pyinstrument", "-r", "pstats", "-o", str(out), *pytest_args(target)]


def _cprofile(ctx: Context, target: list[str], out: Path) -> list[str]:
    return [ctx.python, "-m", "cProfile", "-o", str(out), *pytest_args(target)]


BASE = Tool("base", "unprofiled", None, "", _plain)
OURS_CPU = Tool("ours_cpu", "pytest-scalene CPU-only", None, ".json", _ours("--profile-memory=no"))
OURS_FULL = Tool("ours_full", "pytest-scalene full", None, ".json", _ours())
OURS_FULL_PRELOADED = Tool(
    "ours_full_preloaded", "pytest-scalene full, shim preloaded", None, ".json", _ours(),
    preload_shim=True,
)  # fmt: skip
SCALENE_CPU = Tool("scalene_cpu", "Scalene CPU-only", "scalene", ".json", _scalene("--cpu-only"))
SCALENE_FULL = Tool("scalene_full", "Scalene full", "scalene", ".json", _scalene())
MEMRAY = Tool("memray", "memray run", "memray", ".bin", _memray)
PYTEST_MEMRAY = Tool("pytest_memray", "pytest --memray", "pytest-memray", "", _pytest_memray)
PY_SPY = Tool(
    "py_spy", "py-spy", "py-spy", ".txt", _py_spy, note="record --nonblocking, 100 Hz, raw output"
)
PYINSTRUMENT = Tool("pyinstrument", "pyinstrument", "pyinstrument", ".prof", _pyinstrument)
CPROFILE = Tool("cprofile", "cProfile", None, ".prof", _cprofile)

OVERHEAD_TOOLS = [
    OURS_CPU, OURS_FULL, SCALENE_CPU, SCALENE_FULL, MEMRAY, PY_SPY, PYINSTRUMENT, CPROFILE,
]  # fmt: skip
SUITE_ONLY_TOOLS = [PYTEST_MEMRAY]
# The columns of the tables, in this order.
TOOL_ORDER = [
    OURS_CPU, OURS_FULL, SCALENE_CPU, SCALENE_FULL, MEMRAY,
    PYTEST_MEMRAY, PY_SPY, PYINSTRUMENT, CPROFILE,
]  # fmt: skip
LABEL = {t.key: t.label for t in [BASE, *TOOL_ORDER, OURS_FULL_PRELOADED]}


@dataclass
class Run:
    wall_s: float
    cpu_s: float  # user + system of the process tree (the tool's own process included)
    returncode: int
    output: Path | None
    output_bytes: int
    log_tail: str = ""
    timed_out: bool = False
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


def base_env(scale: float) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
        BENCH_SCALE=repr(scale),
        # One BLAS thread: on a shared 2-core machine, BLAS pools spinning add noise.
        OPENBLAS_NUM_THREADS="1",
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        PYTHONDONTWRITEBYTECODE="1",
    )
    return env


def _stacks(ctx: Context, pid: int) -> str:
    """The hung process's Python stacks (py-spy dump), to say where it hung."""
    py_spy = ctx.bin_dir / "py-spy"
    if not py_spy.exists():
        return ""
    try:
        dump = subprocess.run(
            [str(py_spy), "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return " / ".join(ln.strip() for ln in dump.stdout.splitlines() if ln.strip())[:3000]


def _shim_path() -> str:
    from pytest_scalene.core import runenv

    path = runenv.shim_path()
    if path is None or not path.is_file():
        raise SystemExit("the allocator shim is not built (pip install -e .)")
    return str(path)


def _output_size(path: Path) -> int:
    if path.is_dir():  # pytest-memray writes a directory of .bin files
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size if path.exists() else 0


def measure(
    tool: Tool,
    ctx: Context,
    target: list[str],
    env: dict[str, str],
    name: str,
    timeout_s: float,
    keep_output: bool = False,
) -> Run:
    """Run `tool` around pytest on `target` once; time it and size its output. The output is
    deleted unless `keep_output` (the accuracy runs parse it)."""
    out = ctx.out_dir / f"{name}-{tool.key}{tool.suffix}"
    if out.exists():
        shutil.rmtree(out) if out.is_dir() else out.unlink()
    log = ctx.out_dir / f"{name}-{tool.key}.log"
    argv = tool.build(ctx, target, out)
    if tool.preload_shim:
        env = dict(env, LD_PRELOAD=_shim_path())
    with open(log, "w") as log_file:
        start = time.perf_counter()
        proc = subprocess.Popen(
            argv, cwd=WORKLOADS, env=env, stdout=log_file, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        killed: list[str] = []

        def kill() -> None:  # the process group this call started, on timeout only
            killed.append(_stacks(ctx, proc.pid))
            with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                os.killpg(proc.pid, signal.SIGKILL)

        timer = threading.Timer(timeout_s, kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    run = Run(
        wall_s=wall,
        cpu_s=usage.ru_utime + usage.ru_stime,
        returncode=proc.returncode,
        output=out if keep_output else None,
        output_bytes=_output_size(out),
        timed_out=bool(killed),
    )
    if not run.ok:
        lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
        errors = [ln for ln in lines if "INTERNALERROR" in ln or "Error" in ln][-2:]
        run.log_tail = " | ".join(errors + lines[-2:])[-500:]
        if killed and killed[0]:
            run.log_tail += f" | stacks at the timeout: {killed[0]}"
    if not keep_output and out.exists():
        shutil.rmtree(out) if out.is_dir() else out.unlink()
    log.unlink(missing_ok=True) if run.ok else None
    return run
