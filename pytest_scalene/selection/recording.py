"""Records the code map of each test: the code objects that ran from its setup to its teardown
(sampling/code_seen.py), its fixtures' functions (a session fixture runs once, for an earlier
test, and still shapes this one), and the conftest files above it."""

from __future__ import annotations

import inspect
import os
import types
from pathlib import Path
from typing import Any, Protocol

from .code_map import UNMATCHED, CodeMap, TestCode
from .digests import TOP, FileDigests, digest_source
from .places import STDLIB, UNCHECKED, Places, interpreter

MODULE_TOP = "<module>" + TOP


class Seen(Protocol):
    problem: str | None

    def start(self) -> None: ...
    def stop(self) -> list[types.CodeType]: ...


class Recorder:
    def __init__(self, rootdir: str, seen: Seen) -> None:
        self.rootdir = Path(rootdir)
        self.seen = seen
        self.places = Places(rootdir)
        self.tests: dict[str, TestCode] = {}
        self._files: dict[str, FileDigests | None] = {}  # key -> digests as first read
        self._codes: dict[int, tuple[types.CodeType, str, list[str]]] = {}  # id -> place, ids
        self._conftests: dict[Path, list[str]] = {}  # a test's directory -> conftest keys

    def start(self) -> None:
        self.seen.start()

    def stop(self, item: Any) -> None:
        """The end of `item`'s teardown: its map joins the session's."""
        test = TestCode()
        dists: set[str] = set()
        for code in [*self.seen.stop(), *_fixture_codes(item)]:
            place, ids = self._place_of(code)
            if place.startswith("dist:"):
                dists.add(place[len("dist:") :])
            elif ids:
                test.code.setdefault(place, []).extend(ids)
        for key in self._conftest_keys(Path(str(item.path)).parent):
            test.code.setdefault(key, []).append(MODULE_TOP)
        test.code = {key: sorted(set(ids)) for key, ids in sorted(test.code.items())}
        test.distributions = sorted(dists)
        self.tests[item.nodeid] = test

    def _conftest_keys(self, directory: Path) -> list[str]:
        found = self._conftests.get(directory)
        if found is None:
            found = self._conftests[directory] = []
            for conftest in _conftests(directory, self.rootdir):
                key = self.places.of(str(conftest))
                checked = key not in (STDLIB, UNCHECKED) and not key.startswith("dist:")
                if checked and self._digests(key, str(conftest)) is not None:
                    found.append(key)
        return found

    def _place_of(self, code: types.CodeType) -> tuple[str, list[str]]:
        known = self._codes.get(id(code))
        if known is not None and known[0] is code:
            return known[1], known[2]
        place = self.places.of(code.co_filename)
        ids: list[str] = []
        if place not in (STDLIB, UNCHECKED) and not place.startswith("dist:"):
            digests = self._digests(place, code.co_filename)
            if digests is not None:
                ids = digests.ids_of(code) or [f"{UNMATCHED}{code.co_name}:{code.co_firstlineno}"]
        self._codes[id(code)] = (code, place, ids)  # holding the code keeps its id unique
        return place, ids

    def _digests(self, key: str, filename: str) -> FileDigests | None:
        if key not in self._files:
            try:
                source = Path(filename).read_bytes()
                self._files[key] = digest_source(source, filename)
            except (OSError, SyntaxError, ValueError):
                self._files[key] = None
        return self._files[key]

    def code_map(self) -> CodeMap:
        """The session's map, with the digests each file had when the session first read it."""
        files: dict[str, dict[str, str]] = {}
        for test in self.tests.values():
            for key, ids in test.code.items():
                digests = self._files.get(key)
                known = digests.digests if digests is not None else {}
                into = files.setdefault(key, {})
                for ident in ids:
                    into[ident] = known.get(ident, UNMATCHED)
        names = {name for test in self.tests.values() for name in test.distributions}
        versions = self.places.versions
        return CodeMap(
            python=interpreter(),
            distributions={name: versions[name] for name in sorted(names)},
            files=files,
            tests=dict(self.tests),
        )


def _fixture_codes(item: Any) -> list[types.CodeType]:
    info = getattr(item, "_fixtureinfo", None)
    found = []
    for defs in getattr(info, "name2fixturedefs", {}).values():
        for fixturedef in defs:
            func = inspect.unwrap(getattr(fixturedef, "func", None) or (lambda: None))
            code = getattr(func, "__code__", None)
            if isinstance(code, types.CodeType):
                found.append(code)
    return found


def _conftests(directory: Path, rootdir: Path) -> list[Path]:
    """conftest.py files from the test's directory up to the rootdir."""
    found = []
    while True:
        candidate = directory / "conftest.py"
        if candidate.is_file():
            found.append(candidate)
        if directory == rootdir or directory.parent == directory:
            return found
        if not directory.is_relative_to(rootdir):
            return found
        directory = directory.parent


def recording_wanted() -> bool:
    """PYTEST_SCALENE_CODE_MAP=off turns recording off (a tool that evaluates frames itself, a
    debugger, or a measurement of the recording's own cost)."""
    return os.environ.get("PYTEST_SCALENE_CODE_MAP", "on").lower() not in ("off", "0", "no")
