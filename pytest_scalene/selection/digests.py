"""Digests of a Python source file's code, computed from the source, never from the running
code objects (pytest rewrites test modules' asserts; both sides must be digested alike).

Each code object gets an id: its qualified name (computed here the same way on every Python),
`#2`, `#3`... for a repeated name (two lambdas in one function). Two digests per id:
- deep: bytecode, constants, names, argument shape, flags and nested code, docstrings and line
  numbers left out, so moving code or editing a docstring changes nothing;
- top: the same with nested code reduced to its name: a module's or class's own statements
  (its constants, decorators, default values), not the bodies of its functions.
"""

from __future__ import annotations

import ast
import hashlib
import types
from dataclasses import dataclass, field

TOP = "@top"  # suffix of an id whose top digest is meant: "<module>@top", "Class@top"
_FUNCTION = 0x0001 | 0x0002  # CO_OPTIMIZED | CO_NEWLOCALS: a function's body, not a class's


@dataclass
class FileDigests:
    digests: dict[str, str] = field(default_factory=dict)  # id (or id@top) -> digest
    parents: dict[str, str] = field(default_factory=dict)  # id -> enclosing id
    by_start: dict[tuple[str, int], list[str]] = field(default_factory=dict)  # (name, line)

    def ids_of(self, code: types.CodeType) -> list[str]:
        """The ids a running code object may be (several only for same-named code on one
        line), each with the top digests of the scopes enclosing it; [] when it is not in this
        source (the file changed since it was imported, or code built by exec)."""
        found: list[str] = []
        for ident in self.by_start.get((code.co_name, code.co_firstlineno), []):
            found.append(ident + TOP if code.co_flags & _FUNCTION == 0 else ident)
            parent = self.parents.get(ident)
            while parent is not None:
                found.append(parent + TOP)
                parent = self.parents.get(parent)
        return found


def _without_docstrings(tree: ast.Module) -> ast.Module:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            first = body[0].value if body and isinstance(body[0], ast.Expr) else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                node.body = body[1:] or [ast.Pass(lineno=first.lineno, col_offset=0)]
    return tree


def _constant(value: object, nested: dict[int, str]) -> object:
    if isinstance(value, types.CodeType):
        return ("code", nested[id(value)])
    if isinstance(value, tuple):
        return tuple(_constant(v, nested) for v in value)
    if isinstance(value, frozenset):  # iteration order follows string hashing: sort
        return ("frozenset", tuple(sorted(repr(_constant(v, nested)) for v in value)))
    return (type(value).__name__, repr(value))


def _digest(code: types.CodeType, nested: dict[int, str]) -> str:
    consts = code.co_consts
    if "__firstlineno__" in code.co_names and not code.co_flags & _FUNCTION:
        # 3.13+ class bodies store their first line: a line number, left out like the others
        line = code.co_firstlineno
        consts = tuple("<line>" if type(c) is int and c == line else c for c in consts)
    shape = (
        code.co_code,
        _constant(consts, nested),
        code.co_names,
        code.co_varnames,
        code.co_freevars,
        code.co_cellvars,
        code.co_argcount,
        code.co_posonlyargcount,
        code.co_kwonlyargcount,
        code.co_flags,
    )
    return hashlib.blake2b(repr(shape).encode(), digest_size=8).hexdigest()


def fingerprint(source: bytes) -> str:
    """A file's bytes, summed up: equal fingerprints mean equal digests (on one interpreter),
    so a file unchanged since the map was recorded need not be digested again."""
    return hashlib.blake2b(source, digest_size=16).hexdigest()


def digest_source(source: str | bytes, filename: str) -> FileDigests:
    """Every code object of a module's source with its ids and digests. Raises SyntaxError
    (and ValueError for null bytes) like compile()."""
    tree = _without_docstrings(ast.parse(source, filename))
    module = compile(tree, filename, "exec", dont_inherit=True)
    found = FileDigests()
    seen: dict[str, int] = {}

    def walk(code: types.CodeType, qualname: str, parent: str | None) -> tuple[str, str]:
        count = seen[qualname] = seen.get(qualname, 0) + 1
        ident = qualname if count == 1 else f"{qualname}#{count}"
        if parent is not None:
            found.parents[ident] = parent
        found.by_start.setdefault((code.co_name, code.co_firstlineno), []).append(ident)
        deep: dict[int, str] = {}
        names: dict[int, str] = {}
        inner = f"{qualname}.<locals>." if code.co_flags & _FUNCTION else f"{qualname}."
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                prefix = "" if parent is None else inner
                child, child_deep = walk(const, prefix + const.co_name, ident)
                deep[id(const)], names[id(const)] = child_deep, child
        deep_digest = _digest(code, deep)
        found.digests[ident] = deep_digest
        found.digests[ident + TOP] = _digest(code, names)
        return ident, deep_digest

    walk(module, "<module>", None)
    return found
