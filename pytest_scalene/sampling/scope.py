"""Which code is "profiled": the project under test and its tests, not the stdlib,
site-packages, pytest or this plugin. Decisions are cached per filename: the samplers ask on
every sample.

And the line a sample lands on (where_it_ran): each thread's innermost profiled line, except
at a function's entry. On 3.11+ a function starts with RESUME, which runs pending signal
handlers (and GIL hand-offs) with the frame's line on its `def`; the interval was spent before
the call, so it goes to the calling line (the first body line when no profiled code called
it): a `def` line is never charged."""

from __future__ import annotations

import dis
import os
import sys
from collections.abc import Iterable
from fnmatch import fnmatch
from pathlib import Path
from types import CodeType, FrameType

from ..core.model import LineKey

_PLUGIN_DIR = str(Path(__file__).resolve().parent.parent)  # the whole package


def _library_roots() -> tuple[str, ...]:
    # The standard library is where `os` is (C modules' lib-dynload sits in it); sysconfig's
    # paths (1.7 ms a session to compute) name nothing beyond it, the site-packages on sys.path
    # and the prefixes, in venvs, distributions' and source builds' layouts alike.
    roots = {os.path.realpath(os.path.dirname(os.__file__))}
    for path in sys.path:
        if "site-packages" in path or "dist-packages" in path:
            roots.add(os.path.realpath(path))
    roots.add(os.path.realpath(sys.prefix))
    roots.add(os.path.realpath(sys.base_prefix))
    roots.add(_PLUGIN_DIR)
    return tuple(sorted(roots))


class CodeScope:
    """Decides whether a code object belongs to profiled code and names its lines."""

    def __init__(
        self,
        rootdir: str | os.PathLike[str],
        include: Iterable[str] = (),
        exclude: Iterable[str] = (),
    ) -> None:
        self.rootdir = os.path.realpath(rootdir)
        self.include = tuple(include)
        self.exclude = tuple(exclude)
        self._libraries = _library_roots()
        self._by_filename: dict[str, str | None] = {}

    def relative_name(self, filename: str) -> str | None:
        """The report name of a profiled file, or None when the file is not profiled."""
        try:
            return self._by_filename[filename]
        except KeyError:
            name = self._by_filename[filename] = self._decide(filename)
            return name

    def _decide(self, filename: str) -> str | None:
        if not filename or filename.startswith("<"):
            return None
        path = os.path.realpath(filename)
        inside_root = path.startswith(self.rootdir + os.sep)
        name = Path(os.path.relpath(path, self.rootdir)).as_posix() if inside_root else path
        if any(fnmatch(name, pat) or fnmatch(path, pat) for pat in self.exclude):
            return None
        if any(fnmatch(name, pat) or fnmatch(path, pat) for pat in self.include):
            return name
        if not inside_root:
            return None
        # A virtualenv or the plugin itself inside the rootdir is still library code.
        if any(path.startswith(lib + os.sep) for lib in self._libraries):
            return None
        return name

    def profiled_frame(self, frame: FrameType | None) -> tuple[FrameType, str] | None:
        """The innermost frame of `frame`'s stack that runs profiled code, with its file name."""
        while frame is not None:
            name = self.relative_name(frame.f_code.co_filename)
            if name is not None:
                return frame, name
            frame = frame.f_back
        return None

    def locate(self, frame: FrameType | None) -> tuple[LineKey, int] | None:
        """The profiled line `frame` is executing, with its function's first line."""
        found = self.profiled_frame(frame)
        if found is None:
            return None
        frame, name = found
        code = frame.f_code
        return LineKey(name, frame.f_lineno or code.co_firstlineno, _function_name(code)), (
            code.co_firstlineno
        )

    def locate_code(self, code: CodeType, lineno: int | None) -> tuple[LineKey, int] | None:
        """`code`'s line `lineno` when `code` is profiled, with its function's first line."""
        name = self.relative_name(code.co_filename)
        if name is None:
            return None
        line = lineno if lineno and lineno > 0 else code.co_firstlineno
        return LineKey(name, line, _function_name(code)), code.co_firstlineno


def _function_name(code: CodeType) -> str:
    return getattr(code, "co_qualname", code.co_name)


# -- the line a sample lands on ------------------------------------------------------------
_RESUME = dis.opmap.get("RESUME")  # 3.11+
_entry_cache: dict[tuple[CodeType, int], bool] = {}
_body_line_cache: dict[CodeType, int] = {}


def at_entry(frame: FrameType) -> bool:
    """`frame` sits on its function's entry RESUME (oparg 0 in its low bits; 1-3 resume after a
    yield or an await, on the line of the yield): its line reads as the `def` line."""
    key = (frame.f_code, frame.f_lasti)
    found = _entry_cache.get(key)
    if found is None:
        code, lasti = frame.f_code.co_code, frame.f_lasti
        found = (
            _RESUME is not None
            and 0 <= lasti < len(code) - 1
            and code[lasti] == _RESUME
            and code[lasti + 1] & 3 == 0
        )
        if len(_entry_cache) > 100_000:
            _entry_cache.clear()
        _entry_cache[key] = found
    return found


def first_body_line(code: CodeType) -> int:
    """The first line after the `def` (and decorators) that has instructions."""
    line = _body_line_cache.get(code)
    if line is None:
        lines = [n for _s, _e, n in code.co_lines() if n is not None and n > code.co_firstlineno]
        line = min(lines, default=code.co_firstlineno)
        if len(_body_line_cache) > 100_000:
            _body_line_cache.clear()
        _body_line_cache[code] = line
    return line


def where_it_ran(scope: CodeScope, frame: FrameType | None) -> tuple[LineKey, int] | None:
    """The profiled line that ran: the innermost one, or at a function's entry its caller's
    (module doc)."""
    found = scope.profiled_frame(frame)
    if found is None:
        return None
    inner, _name = found
    if not at_entry(inner):
        return scope.locate(inner)
    caller = scope.locate(inner.f_back)
    if caller is not None:
        return caller
    code = inner.f_code
    return scope.locate_code(code, first_body_line(code))
