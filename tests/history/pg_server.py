"""A throwaway PostgreSQL server for the history store's tests, from Debian's postgresql package.

initdb refuses to run as root, so as root the server runs as `nobody` (through runuser) in a
directory made for it. It listens on 127.0.0.1 on a free port with trust authentication, and is
stopped (immediate mode) and removed when the tests end. Where no PostgreSQL is installed the
tests that need one skip, saying so.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

BIN_GLOBS = ("/usr/lib/postgresql/*/bin",)


def find_bin() -> Path | None:
    for pattern in BIN_GLOBS:
        for found in sorted(glob.glob(pattern), reverse=True):
            if Path(found, "initdb").exists() and Path(found, "pg_ctl").exists():
                return Path(found)
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path and shutil.which("pg_ctl") else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="scalene-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.prefix: list[str] = []
        if os.geteuid() == 0:
            if not shutil.which("runuser"):
                raise RuntimeError("running as root without runuser: cannot start PostgreSQL")
            os.chmod(self.root, 0o777)
            self.prefix = ["runuser", "-u", "nobody", "--"]

    def _run(self, *args: str) -> None:
        subprocess.run(
            [*self.prefix, *args],
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
            cwd=self.root,
        )

    def start(self) -> None:
        self._run(
            str(self.bindir / "initdb"),
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth=trust",
            "--no-sync",
            "-E",
            "UTF8",
        )
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            str(self.bindir / "pg_ctl"),
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.root / "log"),
            "-w",
            "-t",
            "60",
            "start",
        )

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")
        deadline = time.monotonic() + 10
        while (self.data / "postmaster.pid").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        shutil.rmtree(self.root, ignore_errors=True)


def unavailable_reason() -> str | None:
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg 3 is not installed (pip install 'pytest-scalene[history-pg]')"
    if find_bin() is None:
        return (
            "PostgreSQL is not installed (no initdb/pg_ctl under /usr/lib/postgresql/*/bin; "
            ".ci/run installs Debian's postgresql package)"
        )
    return None
