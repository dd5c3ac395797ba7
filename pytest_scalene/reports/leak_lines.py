"""The words for leaks, held memory and memory retained across tests, shared by the terminal's
per test details and its summary (docs/memory.md, Leaks)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..core.natural_values import number_or_zero
from ..sampling.leaks import SessionLine, session_retained


def _entries(extra: Mapping[str, Any], key: str) -> list[dict[str, Any]]:
    return [e for e in extra.get(key) or [] if isinstance(e, dict)]


def likely_leaks(extra: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Confirmed leaks: they grew again at their line when the test ran again."""
    return _entries(extra, "leaks")


def held(extra: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Suspects not confirmed (a cache filled once, a test that did not pass), with why."""
    return _entries(extra, "held")


def where(entry: Mapping[str, Any]) -> str:
    """`file:line in function` (the function when known)."""
    text = f"{entry.get('file')}:{entry.get('line')}"
    function = str(entry.get("function") or "").strip()
    return f"{text} in {function}" if function else text


def describe_leak(entry: Mapping[str, Any]) -> str:
    """`file:line in f  probability 99%  41.3 MB/s  20.0 MB kept, 19.8 MB more per run`."""
    text = (
        f"{where(entry)}  probability {100 * number_or_zero(entry.get('probability')):.0f}%"
        f"  {number_or_zero(entry.get('rate_mb_s')):.1f} MB/s"
    )
    if "leaked_mb" in entry:  # profiles written before it have none
        text += f"  {number_or_zero(entry.get('leaked_mb')):.1f} MB kept"
    if "again_mb" in entry:
        text += f", {number_or_zero(entry.get('again_mb')):.1f} MB more per run"
    return text


def describe_held(entry: Mapping[str, Any]) -> str:
    """`file:line in f  15.0 MB held (did not grow when run again)`."""
    why = str(entry.get("why") or "")
    size = f"{number_or_zero(entry.get('leaked_mb')):.1f} MB"
    if why.startswith("held"):
        return f"{where(entry)}  {size} {why}"
    return f"{where(entry)}  {size} held, {why}"


def retained_lines(extras: Iterable[Mapping[str, Any]]) -> list[SessionLine]:
    """Lines that retained SESSION_RETAINED_MB or more over the session's tests."""
    return session_retained(extras)


def describe_retained(row: SessionLine) -> str:
    name = f" in {row.function}" if row.function else ""
    tests = f"{row.tests} test{'s' if row.tests != 1 else ''}"
    return f"{row.mb:7.1f} MB   {row.file}:{row.line}{name} ({tests})"
