"""Where a code object's file lives, which decides how the map covers it: the interpreter's
standard library (covered by the interpreter's version), an installed distribution (by its
version), a Python source file of the project or elsewhere (by digests of its code), or nothing
a map can check (code built by exec or eval, frozen modules, templates compiled to Python)."""

from __future__ import annotations

import functools
import importlib.metadata
import os
import platform
import site
import sys
import sysconfig
from pathlib import Path

STDLIB = "stdlib"
INSTALL_DIRS = ("site-packages", "dist-packages")
OWN_PACKAGE = os.path.realpath(Path(__file__).parent.parent) + os.sep
UNCHECKED = "unchecked"


@functools.cache
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
        self._entries: list[str] | None = None
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
        inside_root = real.startswith(self.rootdir)
        if real.startswith(OWN_PACKAGE) and not inside_root:
            return self.dist("pytest-scalene")  # the measuring plugin, not the code under test
        # Installed code is whatever an installation directory on sys.path holds (a virtual
        # environment inside the rootdir included), wherever that directory is.
        entry = self._entry_of(real)
        if entry is not None and self._installed(entry):
            owner = self._owner(real[len(entry) :])
            if owner is not None:
                return self.dist(owner)
        elif not inside_root and any(real.startswith(d) for d in self._stdlib):
            return STDLIB
        if inside_root:
            return Path(real[len(self.rootdir) :]).as_posix()
        return Path(real).as_posix()

    def _entry_of(self, real: str) -> str | None:
        """The longest sys.path entry (or site directory) holding the file."""
        if self._entries is None:
            found = {os.path.realpath(p or os.curdir) + os.sep for p in sys.path}
            found.update(self._site)
            self._entries = sorted(found, key=len, reverse=True)
        return next((e for e in self._entries if real.startswith(e)), None)

    def _installed(self, entry: str) -> bool:
        return entry in self._site or os.path.basename(entry.rstrip(os.sep)) in INSTALL_DIRS

    def _owner(self, inside: str) -> str | None:
        top = inside.split(os.sep, 1)[0]
        top = top[: -len(".py")] if top.endswith(".py") else top
        guessed = _named_owner(top)
        if guessed is not None:
            return guessed
        if self._owners is None:  # reads every distribution's file list: 40 ms to seconds
            self._owners = dict(importlib.metadata.packages_distributions())
        owners = self._owners.get(top)
        return sorted(owners)[0] if owners else None

    def dist(self, name: str) -> str:
        if name not in self.versions:
            self.versions[name] = installed_version(name) or "?"
        return "dist:" + name


@functools.cache
def _named_owner(top: str) -> str | None:
    """The distribution named as top-level package `top` is (`_pytest`: pytest), when it
    provides it; most do, and one look-up spares reading every distribution's files."""
    for name in dict.fromkeys((top, top.lstrip("_"))):
        try:
            dist = importlib.metadata.distribution(name)
        except (importlib.metadata.PackageNotFoundError, ValueError):
            continue
        listed = (dist.read_text("top_level.txt") or "").split()
        if top in listed or any(
            str(f).split("/", 1)[0] in (top, f"{top}.py") for f in dist.files or ()
        ):
            return dist.metadata["Name"]
    return None


@functools.cache  # a session's installed distributions do not change under it
def installed_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None
