"""The benchmark's own virtual environment, with the peers installed from PyPI.

The peers (Scalene, memray, pytest-memray, py-spy, pyinstrument) and matplotlib go into
build/bench-venv, not into the project's venv: pytest-memray would otherwise load into every
pytest run of the project's own tests. The bench venv sees the project's venv through a .pth
file (site.addsitedir, so that its editable install of pytest-scalene works), with its own
packages first. Every measured command runs on this one interpreter, unprofiled runs included.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / "build" / "bench-venv"
REQUIREMENTS = Path(__file__).resolve().parent / "requirements-peers.txt"
LAYER_PTH = "zz_pytest_scalene_project.pth"
MARKER = "PYTEST_SCALENE_BENCH_VENV"


@dataclass
class Environment:
    python: str
    bin_dir: Path
    versions: dict[str, str] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)  # distribution -> why


def _venv_python() -> Path:
    return VENV / "bin" / "python"


def _run(cmd: list[str], timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


def _requirements() -> list[str]:
    lines = REQUIREMENTS.read_text().splitlines()
    return [ln.split("#")[0].strip() for ln in lines if ln.split("#")[0].strip()]


def _dist_name(requirement: str) -> str:
    return requirement.split("==")[0].split(">=")[0].strip()


def ensure_venv(log: Callable[[str], None]) -> None:
    """Create build/bench-venv layered on the running interpreter's environment (which must be
    the project's venv, where pytest-scalene is installed) and install the peers that are not
    there yet. A peer that fails to install is left out; the report says why."""
    try:
        import pytest_scalene  # noqa: F401
    except ImportError:
        sys.exit(
            "benchmarks/run.py must run on the project's venv, where pytest-scalene is "
            "installed: .venv/bin/python benchmarks/run.py"
        )
    python = _venv_python()
    if not python.exists():
        log(f"creating {VENV.relative_to(ROOT)}")
        result = _run([sys.executable, "-m", "venv", "--without-pip", str(VENV)])
        if result.returncode != 0:
            sys.exit(f"cannot create {VENV}: {result.stderr.strip()}")
        # pip comes from the project's venv (`python -m pip --python`), so no download is
        # needed to bootstrap it.
    site_dir = Path(
        _run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
        ).stdout.strip()
    )
    project_site = sysconfig.get_paths()["purelib"]
    (site_dir / LAYER_PTH).write_text(f"import site; site.addsitedir({project_site!r})\n")
    missing = [req for req in _requirements() if not _installed_in_venv(python, req)]
    for req in missing:
        log(f"installing {req} into {VENV.relative_to(ROOT)}")
        cmd = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", req]
        result = _run(cmd)
        if result.returncode != 0:
            tail = (result.stderr or result.stdout).strip().splitlines()[-1:]
            log(f"  could not install {req}: {' '.join(tail)}")


def _installed_in_venv(python: Path, requirement: str) -> bool:
    name, _, version = requirement.partition("==")
    code = (
        "import importlib.metadata as m, sys\n"
        f"try: v = m.version({name.strip()!r})\n"
        "except m.PackageNotFoundError: sys.exit(1)\n"
        f"sys.exit(0 if not {version.strip()!r} or v == {version.strip()!r} else 1)\n"
    )
    return _run([str(python), "-c", code]).returncode == 0


def reexec_in_venv() -> None:
    """Run this script again on the bench venv's interpreter (once)."""
    if os.environ.get(MARKER):
        return
    env = dict(os.environ, **{MARKER: "1"})
    python = str(_venv_python())
    os.execve(python, [python, *sys.argv], env)


def current() -> Environment:
    """What the running (bench venv) interpreter has: versions, and which peers are missing."""
    env = Environment(python=sys.executable, bin_dir=Path(sys.executable).parent)
    names = ["pytest-scalene", "pytest", "numpy"] + [_dist_name(r) for r in _requirements()]
    for name in names:
        try:
            env.versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            env.missing[name] = f"{name} is not installed (pip install failed: see the log)"
    return env


def machine() -> dict[str, object]:
    """The machine and software the numbers were taken on."""
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = None
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        mem_gib = round(pages / 2**30, 1)
    except (ValueError, OSError):
        pass
    commit = _run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"]).stdout.strip()
    dirty = _run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"])
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": mem_gib,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "commit": commit + ("+dirty" if dirty.stdout.strip() else ""),
    }
