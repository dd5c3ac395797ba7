"""Records the code map of each test: the code objects that ran from its setup to its teardown
(sampling/code_seen.py), its fixtures' functions (a session fixture runs once, for an earlier
test, and still shapes this one), and the conftest files above it."""

from __future__ import annotations

import contextlib
import inspect
import os
import types
from pathlib import Path
from typing import Any, Protocol

from ..core.runenv import interpreter
from .code_map import UNMATCHED, CodeMap, TestCode
from .digests import TOP, FileDigests, digest_source, fingerprint
from .places import STDLIB, UNCHECKED, Places

MODULE_TOP = "<module>" + TOP


class Seen(Protocol):
    problem: str | None
    follow: Any
    first_runs_only: bool

    def start(self) -> None: ...
    def stop(self) -> list[types.CodeType]: ...
    def take_outside(self) -> list[types.CodeType]: ...


class Recorder:
    def __init__(self, rootdir: str, seen: Seen) -> None:
        self.rootdir = Path(rootdir)
        self.seen = seen
        self.places = Places(rootdir)
        self.tests: dict[str, TestCode] = {}
        self._files: dict[str, FileDigests | None] = {}  # key -> digests as first read
        self._fingerprints: dict[str, str] = {}  # key -> of the bytes those came from
        self._known: dict[int, int] = {}  # id(code) -> its index in _places
        self._kept: list[types.CodeType] = []  # those codes: an id is never reused
        self._places: list[tuple[str, list[str], str | None]] = []
        self._shared: dict[str, int] = {}  # a distribution (or "": code no map checks) -> index
        self._conftests: dict[str, list[str]] = {}  # a test's file -> its conftests' keys
        # Where installed code is seen only where it first runs in the process (sys.monitoring,
        # sampling/code_seen.py), a test is given every distribution run so far: a version
        # change then re-measures more tests than ran its code, never fewer.
        self._distributions_so_far: set[str] = set()
        seen.follow = self._follows  # the project's code is seen in every test that runs it

    def start(self) -> None:
        self.seen.start()

    def stop(self, item: Any) -> None:
        """The end of `item`'s teardown: its map joins the session's."""
        test = TestCode()
        dists: set[str] = set()
        codes = [*self.seen.stop(), *_fixture_codes(item)]
        # Some 400 code objects a test, most of them pytest's: their places' indexes, looked
        # up in C, come down to a few dozen (one per distribution, one per project function).
        found = set(map(self._known.get, map(id, codes)))
        if None in found:
            found.discard(None)
            found.update(self._place_of(code) for code in codes if id(code) not in self._known)
        for index in found:
            key, ids, dist = self._places[index]
            if dist is not None:
                dists.add(dist)
            elif ids:
                test.code.setdefault(key, []).extend(ids)
        if self.seen.first_runs_only:
            self.between_tests()
            dists |= self._distributions_so_far
            self._distributions_so_far = dists
        for key in self._conftest_keys(str(item.path)):
            test.code.setdefault(key, []).append(MODULE_TOP)
        test.code = {key: sorted(set(ids)) for key, ids in sorted(test.code.items())}
        test.distributions = sorted(dists)
        self.tests[item.nodeid] = test

    def between_tests(self) -> None:
        """After each test, recorded or not: the code that first ran outside the recordings
        (its distributions count from now on; the project's is followed from the next)."""
        for code in self.seen.take_outside():
            index = self._known.get(id(code))
            dist = self._places[index if index is not None else self._place_of(code)][2]
            if dist is not None:
                self._distributions_so_far.add(dist)

    def _follows(self, code: types.CodeType) -> bool:
        index = self._known.get(id(code))
        _, ids, dist = self._places[index if index is not None else self._place_of(code)]
        return dist is None and bool(ids)

    def _conftest_keys(self, test_file: str) -> list[str]:
        found = self._conftests.get(test_file)
        if found is None:
            found = self._conftests[test_file] = []
            for conftest in _conftests(Path(test_file).parent, self.rootdir):
                key = self.places.of(str(conftest))
                checked = key not in (STDLIB, UNCHECKED) and not key.startswith("dist:")
                if checked and self._digests(key, str(conftest)) is not None:
                    found.append(key)
        return found

    def _place_of(self, code: types.CodeType) -> int:
        """The index in _places of the code's place: (its file's key, its ids, its
        distribution or None); the code object is kept, so that its id stays its own."""
        place = self.places.of(code.co_filename)
        ids: list[str] = []
        dist = place[len("dist:") :] if place.startswith("dist:") else None
        if place not in (STDLIB, UNCHECKED) and dist is None:
            digests = self._digests(place, code.co_filename)
            if digests is not None:
                ids = digests.ids_of(code) or [f"{UNMATCHED}{code.co_name}:{code.co_firstlineno}"]
        if dist is not None or not ids:  # shared: one per distribution, one for the rest
            index = self._shared.setdefault(dist or "", len(self._places))
            if index == len(self._places):
                self._places.append((place, [], dist))
        else:
            index = len(self._places)
            self._places.append((place, ids, None))
        self._kept.append(code)
        self._known[id(code)] = index
        return index

    def _digests(self, key: str, filename: str) -> FileDigests | None:
        if key not in self._files:
            try:
                source = Path(filename).read_bytes()
                self._files[key] = digest_source(source, filename)
                self._fingerprints[key] = fingerprint(source)
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
            sources={key: self._fingerprints[key] for key in files if key in self._fingerprints},
            compiled=_fingerprints(self.places.compiled_modules()),
        )


def _fingerprints(files: list[tuple[str, str]]) -> dict[str, str]:
    found = {}
    for key, filename in files:
        with contextlib.suppress(OSError):
            found[key] = fingerprint(Path(filename).read_bytes())
    return found


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
