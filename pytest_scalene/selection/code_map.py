"""The code map file: which code each test ran, with the digests that code had when it ran
(docs/selection.md). Stored beside the baselines as JSON with sorted keys, one entry a line, so
that a diff shows what changed and an unchanged map is written byte for byte the same."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..config.options import CODE_MAP_FILE
from ..core.atomic_write import write_text_atomic

FORMAT = "pytest-scalene code map"
VERSION = 1
FILE_NAME = CODE_MAP_FILE
UNMATCHED = "?"  # the digest of code the source did not explain: never equal to a current one


class CodeMapError(Exception):
    """A map file that cannot be read: corrupt, foreign or of another version."""


@dataclass
class TestCode:
    __test__ = False  # not a test class, despite its name
    code: dict[str, list[str]] = field(default_factory=dict)  # file key -> code ids
    distributions: list[str] = field(default_factory=list)


@dataclass
class CodeMap:
    python: str
    distributions: dict[str, str] = field(default_factory=dict)  # name -> version
    files: dict[str, dict[str, str]] = field(default_factory=dict)  # key -> id -> digest
    tests: dict[str, TestCode] = field(default_factory=dict)
    # key -> the fingerprint of the bytes its digests came from (digests.fingerprint), where
    # they all came from the same bytes: a file still holding them needs no digesting.
    sources: dict[str, str] = field(default_factory=dict)
    # key -> the fingerprint of each compiled extension module of the project imported when the
    # map was recorded (places.compiled_modules): no test's code shows calls into it, so a
    # change to it measures every test.
    compiled: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> str:
        data = {
            "format": FORMAT,
            "version": VERSION,
            "python": self.python,
            "distributions": self.distributions,
            "files": self.files,
            "sources": self.sources,
            "compiled": self.compiled,
            "tests": {
                nodeid: {
                    "code": {key: sorted(ids) for key, ids in test.code.items()},
                    "distributions": sorted(test.distributions),
                }
                for nodeid, test in self.tests.items()
            },
        }
        return json.dumps(data, indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str, where: str) -> CodeMap:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise CodeMapError(f"{where} is not JSON ({exc})") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise CodeMapError(f"{where} is not a pytest-scalene code map")
        if data.get("version") != VERSION:
            raise CodeMapError(
                f"{where} is a code map of version {data.get('version')!r}; this pytest-scalene "
                f"reads version {VERSION}"
            )
        try:
            return cls(
                python=_str(data["python"]),
                distributions={_str(k): _str(v) for k, v in data["distributions"].items()},
                files={
                    _str(key): {_str(i): _str(d) for i, d in ids.items()}
                    for key, ids in data["files"].items()
                },
                # Absent from maps written before it: every file is digested.
                sources={_str(k): _str(v) for k, v in data.get("sources", {}).items()},
                compiled={_str(k): _str(v) for k, v in data.get("compiled", {}).items()},
                tests={
                    _str(nodeid): TestCode(
                        code={_str(k): [_str(i) for i in ids] for k, ids in t["code"].items()},
                        distributions=[_str(d) for d in t["distributions"]],
                    )
                    for nodeid, t in data["tests"].items()
                },
            )
        except (KeyError, AttributeError, TypeError) as exc:
            raise CodeMapError(
                f"{where} is a damaged code map ({type(exc).__name__}: {exc})"
            ) from None

    def consistent(self, test: TestCode, newer: CodeMap) -> bool:
        """Whether `test`, recorded with this map's digests, still holds beside `newer`'s."""
        if self.python != newer.python:
            return False
        if any(newer.compiled.get(k, v) != v for k, v in self.compiled.items()):
            return False
        for name in test.distributions:
            if newer.distributions.get(name, self.distributions.get(name)) != (
                self.distributions.get(name)
            ):
                return False
        for key, ids in test.code.items():
            now = newer.files.get(key, {})
            for ident in ids:
                if ident in now and now[ident] != self.files.get(key, {}).get(ident):
                    return False
        return True

    def merged(self, newer: CodeMap) -> CodeMap:
        """This map updated with a later run's: its tests replace ours; one of ours that it
        did not run is kept only while every digest and version it rests on is unchanged."""
        kept = {
            nodeid: test
            for nodeid, test in self.tests.items()
            if nodeid not in newer.tests and self.consistent(test, newer)
        }
        tests = {**kept, **newer.tests}
        files: dict[str, dict[str, str]] = {}
        fingerprints: dict[str, set[str | None]] = {}  # of the maps each file's digests came from
        for nodeid, test in tests.items():
            source = newer if nodeid in newer.tests else self
            for key, ids in test.code.items():
                into = files.setdefault(key, {})
                fingerprints.setdefault(key, set()).add(source.sources.get(key))
                for ident in ids:
                    into[ident] = source.files.get(key, {}).get(ident, UNMATCHED)
        names = {name for test in tests.values() for name in test.distributions}
        versions = {**self.distributions, **newer.distributions}
        return CodeMap(
            python=newer.python,
            distributions={n: versions[n] for n in sorted(names) if n in versions},
            files=files,
            tests=tests,
            sources={
                key: next(iter(found))
                for key, found in sorted(fingerprints.items())
                if len(found) == 1 and None not in found
            },
            compiled={**self.compiled, **newer.compiled},
        )


def built_only(code_map: CodeMap, rootdir: Path) -> CodeMap:
    """`code_map` without the compiled modules no longer built under `rootdir`: a merged map
    keeps those of earlier runs (a run of some tests may not import them all), and one that was
    renamed or removed would otherwise measure every test ever after."""
    compiled = {k: v for k, v in code_map.compiled.items() if (rootdir / k).is_file()}
    return replace(code_map, compiled=compiled)


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, found {value!r}")
    return value


def load(path: Path) -> CodeMap | None:
    """The map at `path`, None when there is none. Raises CodeMapError when it is unreadable."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise CodeMapError(f"{path} cannot be read ({exc})") from None
    return CodeMap.from_json(text, str(path))


def save(path: Path, code_map: CodeMap) -> bool:
    """Write the map, unless the file holds it already (byte for byte): whether it wrote."""
    text = code_map.to_json()
    try:
        if path.read_text(encoding="utf-8") == text:
            return False
    except (OSError, UnicodeDecodeError):
        pass  # none yet, or unreadable: replaced
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, text)
    return True
