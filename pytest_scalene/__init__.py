"""pytest-scalene: per-line CPU, memory, leak, copy and GPU budgets for pytest."""

import sys as _sys

__version__ = "0.1.0"


def _leave_out_of_assertion_rewriting() -> None:
    """pytest rewrites the asserts of every module of an installed plugin's distribution, and
    where it cannot cache the result (PYTHONDONTWRITEBYTECODE, common in containers, or a
    read-only site-packages) it parses and compiles each of them again in every session: ~0.1 s
    of CPU a session for this package's modules, which are not test code. Its hook keeps the
    marked names in a set that has no public remover; where that changes, nothing happens."""
    for finder in _sys.meta_path:
        marked = getattr(finder, "_must_rewrite", None)
        if type(finder).__name__ == "AssertionRewritingHook" and isinstance(marked, set):
            marked.discard(__name__)


_leave_out_of_assertion_rewriting()
