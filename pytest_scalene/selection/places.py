"""Where a code object's file lives, which decides how the map covers it: the interpreter's
standard library (covered by the interpreter's version), an installed distribution (by its
version), a Python source file of the project or elsewhere (by digests of its code), or nothing
a map can check (code built by exec or eval, frozen modules, templates compiled to Python)."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import site
import sys
import sysconfig
from pathlib import Path

STDLIB = "stdlib"
OWN_PACKAGE = os.path.realpath(Path(__file__).parent.parent) + os.sep
UNCHECKED = "unchecked"


def interpreter() -> str:
    """What a map's figures depend on beyond the code: implementation, version and build."""
    return f"{platform.python_implementation()} {platform.python_version()} ({sys.version})"


def _site_dirs() -> list[str]:
    dirs = set(site.getsitepackages() if hasattr(site, "getsitepackages") else [])
    dirs.add(site.getusersitepackages())
    paths = sysconfig.get_paths()
    dirs.update(paths[k] for k in ("purelib", "platlib") if k in paths)
    return sorted((os.path.realpath(d) + os.sep for d in dirs), key=len, reverse=True)


class Places:
    """Classifies file names, with a cache: called for every code object a test ran."""

    def __init__(self, rootdir: str) -> None:
        self.rootdir = os.path.realpath(rootdir) + os.sep
        paths = sysconfig.get_paths()
        self._stdlib = sorted(
            {os.path.realpath(paths[k]) + os.sep for k in ("stdlib", "platstdlib") if k in paths}
        )
        self._site = _site_dirs()
        self._cache: dict[str, str] = {}
        self._owners: dict[str, list[str]] | None = None
        self.versions: dict[str, str] = {}  # distribution -> version, of those seen

    def of(self, filename: str) -> str:
        """STDLIB, UNCHECKED, "dist:NAME" or the file's key in the map (posix, relative to
        the rootdir when inside it)."""
        place = self._cache.get(filename)
        if place is None:
            place = self._cache[filename] = self._classify(filename)
        return place

    def _classify(self, filename: str) -> str:
        if not filename.endswith((".py", ".pyw")) or not os.path.isfile(filename):
            return UNCHECKED
        real = os.path.realpath(filename)
        if real.startswith(OWN_PACKAGE):  # the measuring plugin, not code under test
            return self.dist("pytest-scalene")
        for directory in self._site:  # before the stdlib: site-packages may lie inside it
            if real.startswith(directory):
                return self._distribution(directory, real[len(directory) :])
        if any(real.startswith(d) for d in self._stdlib) and not real.startswith(self.rootdir):
            return STDLIB
        if real.startswith(self.rootdir):
            return Path(real[len(self.rootdir) :]).as_posix()
        return Path(real).as_posix()

    def _distribution(self, directory: str, inside: str) -> str:
        if self._owners is None:
            self._owners = dict(importlib.metadata.packages_distributions())
        top = inside.split(os.sep, 1)[0]
        top = top[: -len(".py")] if top.endswith(".py") else top
        owners = self._owners.get(top)
        if not owners:  # a file no installed distribution claims: check its code instead
            return Path(directory + inside).as_posix()
        return self.dist(sorted(owners)[0])

    def dist(self, name: str) -> str:
        if name not in self.versions:
            self.versions[name] = installed_version(name) or "?"
        return "dist:" + name


def installed_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None
