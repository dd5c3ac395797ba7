"""Which tests must be measured: those whose recorded code, or what it rests on, differs now.

A test's map holds the code it ran, each with its digest when recorded. If all of that code,
the interpreter and the distributions it used are the same in every tree a gate measures
(the working tree; for A/B also the REF tree), the test runs the same code there as when it was
recorded, step by step, so it cannot have changed: it is not measured. That holds whichever
commit the map was recorded at; a stale map only measures more.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from ..core.runenv import interpreter
from .code_map import UNMATCHED, CodeMap
from .digests import FileDigests, digest_source, fingerprint
from .places import installed_version

Reader = Callable[[str], "bytes | None"]  # a map's file key -> that file's bytes (None: absent)


class Tree:
    """One version of the code: a name for messages and a way to read its files, digested
    once each."""

    def __init__(self, name: str, read: Reader, close: Callable[[], None] = lambda: None) -> None:
        self.name = name
        self.read = read
        self.close = close  # what reading holds open (git cat-file)
        self._digests: dict[str, FileDigests | None] = {}
        self._fingerprints: dict[str, str | None] = {}

    def fingerprint(self, key: str) -> str | None:
        """The fingerprint of the file's bytes (None: absent)."""
        if key not in self._fingerprints:
            source = self.read(key)
            self._fingerprints[key] = None if source is None else fingerprint(source)
        return self._fingerprints[key]

    def digests(self, key: str) -> FileDigests | None:
        if key not in self._digests:
            source = self.read(key)
            try:
                self._digests[key] = None if source is None else digest_source(source, key)
            except (SyntaxError, ValueError):
                self._digests[key] = None
        return self._digests[key]


def working_tree(rootdir: Path) -> Tree:
    def read(key: str) -> bytes | None:
        try:
            return (rootdir / key).read_bytes()  # an absolute key stays absolute
        except OSError:
            return None

    return Tree("the working tree", read)


def git_tree(repository: Path, rootdir: Path, commit: str, name: str) -> Tree:
    """The files of `commit`, read with one `git cat-file --batch` for all of them. A key
    outside the repository (an absolute path) is read from the disk, as both sides see it."""
    process: subprocess.Popen[bytes] | None = None
    disk = working_tree(rootdir)

    def read(key: str) -> bytes | None:
        nonlocal process
        path = (rootdir / key).resolve()
        if not path.is_relative_to(repository):
            return disk.read(key)
        if process is None:
            process = subprocess.Popen(
                ["git", "cat-file", "--batch"],
                cwd=repository,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
        assert process.stdin is not None and process.stdout is not None
        name = path.relative_to(repository).as_posix()
        process.stdin.write(f"{commit}:{name}\n".encode())
        process.stdin.flush()
        header = process.stdout.readline().split()
        if len(header) < 3 or header[1] != b"blob":
            return None
        data = process.stdout.read(int(header[2]) + 1)[:-1]  # the blob, then a newline
        return data

    def close() -> None:
        if process is not None:
            assert process.stdin is not None and process.stdout is not None
            process.stdin.close()
            process.stdout.close()
            process.wait()

    return Tree(name, read, close)


def why_measured(code_map: CodeMap, nodeid: str, trees: list[Tree]) -> str | None:
    """Why the test must be measured, or None when its code is unchanged in every tree."""
    test = code_map.tests.get(nodeid)
    if test is None:
        return "no code map for this test (new, or not recorded yet)"
    if code_map.python != interpreter():
        return f"the interpreter changed ({code_map.python.split(' (')[0]} when recorded)"
    for key, recorded_bytes in code_map.compiled.items():
        for tree in trees:
            if tree.fingerprint(key) != recorded_bytes:
                return (
                    f"compiled module {key} changed in {tree.name} (or is not built there): "
                    "no test's code shows its calls into it, so every test is measured"
                )
    for name in test.distributions:
        recorded, now = code_map.distributions.get(name), installed_version(name)
        if recorded != now:
            return f"distribution {name} changed: {recorded} when recorded, {now or 'absent'} now"
    for key, ids in test.code.items():
        recorded = code_map.files.get(key, {})
        for tree in trees:
            recorded_bytes = code_map.sources.get(key)
            if recorded_bytes is not None and tree.fingerprint(key) == recorded_bytes:
                continue  # the very bytes its digests came from
            digests = tree.digests(key)
            if digests is None:
                return f"{key} is missing or does not compile in {tree.name}"
            for ident in ids:
                then = recorded.get(ident, UNMATCHED)
                if then == UNMATCHED or digests.digests.get(ident) != then:
                    return f"{key}: {_shown(ident)} changed in {tree.name}"
    return None


def _shown(ident: str) -> str:
    if ident.startswith(UNMATCHED):
        return f"code the source did not explain ({ident[1:]})"
    if ident.endswith("@top"):
        scope = ident[: -len("@top")]
        return "module-level code" if scope == "<module>" else f"class body {scope}"
    return ident
