"""Replacing attributes for the length of a test and putting back exactly what was there: the
blocking-call patches (blocking_patches.py) and the signal guard (signal_guard.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any


class Patches:
    def __init__(self) -> None:
        self._saved: list[tuple[Any, str, Any]] = []

    def apply(self, replacements: Iterable[tuple[Any, str, Any]]) -> bool:
        """Replace each (owner, name) with its replacement, in the main thread only and not
        twice; return whether it did. A class's own attribute is saved as stored (a function,
        not a bound method), a module's as it is."""
        if self._saved or threading.current_thread() is not threading.main_thread():
            return False
        for owner, name, replacement in replacements:
            original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
            self._saved.append((owner, name, original))
            setattr(owner, name, replacement)
        return True

    def undo(self) -> None:
        while self._saved:
            owner, name, original = self._saved.pop()
            setattr(owner, name, original)
