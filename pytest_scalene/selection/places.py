"""Where a code object's file lives, which decides how the map covers it: the interpreter's
standard library (covered by the interpreter's version), an installed distribution (by its
version), a Python source file of the project or elsewhere (by digests of its code), or nothing
a map can check (code built by exec or eval, frozen modules, templates compiled to Python)."""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.metadata
import os
import re
import site
import sys
import sysconfig
from pathlib import Path

STDLIB = "stdlib"
INSTALL_DIRS = ("site-packages", "dist-packages")
OWN_PACKAGE = os.path.realpath(Path(__file__).parent.parent) + os.sep
UNCHECKED = "unchecked"
_EXTENSION_SUFFIXES = tuple(importlib.machinery.EXTENSION_SUFFIXES)


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
        owners = _installed()[0].get(top)
        return sorted(owners)[0] if owners else None

    def compiled_modules(self) -> list[tuple[str, str]]:
        """(map key, file name) of each compiled extension module imported now from the
        project's own files: code the map cannot see into (no code object runs in it), covered
        as a whole. Installed ones are covered by their distribution's version."""
        found = []
        for module in list(sys.modules.values()):
            filename = getattr(module, "__file__", None)
            if not isinstance(filename, str) or not filename.endswith(_EXTENSION_SUFFIXES):
                continue
            real = os.path.realpath(filename)
            entry = self._entry_of(real)
            if real.startswith(self.rootdir) and not (entry is not None and self._installed(entry)):
                found.append((Path(real[len(self.rootdir) :]).as_posix(), real))
        return sorted(found)

    def dist(self, name: str) -> str:
        if name not in self.versions:
            self.versions[name] = installed_version(name) or "?"
        return "dist:" + name


@functools.cache  # a session's installed distributions do not change under it
def _installed() -> tuple[dict[str, list[str]], dict[str, str]]:
    """(top-level name -> the distributions providing it, as importlib.metadata's
    packages_distributions() finds them: top_level.txt, else the files RECORD lists; each
    distribution's version), read as text: packages_distributions() builds an object per
    listed file (0.1 s for 40 distributions, 6 ms this way)."""
    owners: dict[str, list[str]] = {}
    versions: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        metadata = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
        named, version = _NAME.search(metadata), _VERSION.search(metadata)
        if named is None:
            continue
        name = named.group(1)
        if version is not None:
            versions.setdefault(name, version.group(1))  # the first on sys.path, as imported
        tops = set((dist.read_text("top_level.txt") or "").split())
        if not tops:
            for line in (dist.read_text("RECORD") or "").splitlines():
                first = line.split(",", 1)[0].split("/", 1)[0]
                tops.add(first[: -len(".py")] if first.endswith(".py") else first)
        for top in tops:
            owners.setdefault(top, []).append(name)
    return owners, versions


_NAME = re.compile(r"^Name:[ \t]*(\S+)", re.MULTILINE)
_VERSION = re.compile(r"^Version:[ \t]*(\S+)", re.MULTILINE)


@functools.cache  # a session's installed distributions do not change under it
def installed_version(name: str) -> str | None:
    found = _installed()[1].get(name)
    if found is not None:
        return found
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None
