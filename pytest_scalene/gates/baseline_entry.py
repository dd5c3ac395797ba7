"""A test's profile as a baseline entry (gates/baseline_store.py stores them): its metrics,
each line's CPU share with the line's normalised source text (so that lines inserted above a
function still match), the counted functions, and the CPU time of each timed run."""

from __future__ import annotations

import ast
import functools
import hashlib
import math
import os
import statistics
from pathlib import Path
from typing import Any

from ..core import extra_keys
from ..core.model import TestProfile
from ..core.source import source_line, source_path
from .baseline_store import DIGITS, LineEntry, TestEntry, rounded
from .metrics import COMPARED

TEXT_LIMIT = 160  # longer source lines are stored shortened, with a hash of the whole text


def normalise(text: str) -> str:
    """Whitespace-insensitive source text; very long lines shortened, keeping a hash of them."""
    text = " ".join(text.split())
    if len(text) <= TEXT_LIMIT:
        return text
    digest = hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]
    return f"{text[: TEXT_LIMIT - 20]}… #{digest}"


def _source_line(rootdir: str, file: str, line: int) -> str:
    return normalise(source_line(rootdir, file, line, fresh=True))


def cpu_distribution(profile: TestProfile) -> dict[str, float]:
    """min, median, p90 of the timed runs' CPU seconds (extra_keys.CPU_RUNS; one run: its
    own), their span (wall seconds the runs added up to), their number, and the machine's
    speed beside them where it was timed (gates/machine_speed.py)."""
    runs = profile.extra.get(extra_keys.CPU_RUNS)
    times = sorted(float(t) for t in runs) if isinstance(runs, list) and runs else []
    times = times or [profile.cpu_s]
    span = profile.extra.get(extra_keys.CPU_RUNS_SPAN_S, profile.elapsed_s)
    calls = {"calls": profile.calls} if profile.calls else {}  # benchmark tests: per call
    probe = profile.extra.get(extra_keys.MACHINE_S)  # the machine's speed beside the runs
    machine = {extra_keys.MACHINE_S: probe} if isinstance(probe, (int, float)) else {}
    return {
        **calls,
        "min": rounded(times[0]),
        "median": rounded(statistics.median(times)),
        "p90": rounded(times[min(len(times) - 1, math.ceil(0.9 * len(times)) - 1)]),
        "span_s": round(float(span), DIGITS),
        "runs": len(times),
        **machine,
    }


def entry_from_profile(profile: TestProfile, rootdir: str, commit: str = "") -> TestEntry:
    """The compared metrics of a test and of each line that has any of them."""
    metrics = {m.name: rounded(v) for m in COMPARED if (v := m.of_test(profile)) is not None}
    lines = []
    for key in sorted(profile.lines):
        stats = profile.lines[key]
        values = {m.name: rounded(v) for m in COMPARED if (v := m.of_line(stats)) is not None and v}
        if values:
            offset = key.line - stats.function_line if stats.function_line else key.line
            text = _source_line(rootdir, key.file, key.line)
            share = stats.cpu_s / profile.cpu_s if profile.cpu_s > 0 and stats.cpu_s else None
            entry = LineEntry(
                key.file,
                key.function,
                offset,
                text,
                key.line,
                values,
                None if share is None else round(share, 4),
                stats.samples if share is not None else None,
            )
            lines.append(entry)
    lines.sort(key=lambda e: (e.file, e.function, e.offset, e.text))
    functions = _int_dict(profile.extra.get(extra_keys.INSTRUCTIONS_FUNCTIONS))
    environment = profile.extra.get(extra_keys.INSTRUCTIONS_ENVIRONMENT)
    return TestEntry(
        metrics,
        tuple(lines),
        round(profile.elapsed_s, DIGITS),
        functions,
        {str(k): str(v) for k, v in environment.items()} if isinstance(environment, dict) else {},
        _function_lines(profile, rootdir, functions),
        cpu_distribution(profile),
        commit,
    )


def _int_dict(value: Any) -> dict[str, int]:
    if not isinstance(value, dict):
        return {}
    return {str(k): int(v) for k, v in value.items() if isinstance(v, int) and v >= 0}


def _function_lines(profile: TestProfile, rootdir: str, names: Any) -> dict[str, str]:
    """ "file:line function" for each counted function: its line with the most sampled CPU
    time in this run, else its def line (a genexpr's or lambda's: its enclosing function's),
    else the function alone. A test's count names hundreds of functions: the lines are indexed
    once, and each file is parsed once while it is unchanged (_def_lines)."""
    hottest: dict[tuple[str, str], tuple[float, int]] = {}
    for key, stats in profile.lines.items():
        found = hottest.get((key.file, key.function))
        if found is None or (stats.cpu_s, key.line) > found:
            hottest[(key.file, key.function)] = (stats.cpu_s, key.line)
    lines = {}
    for name in names:
        file, _, qualname = name.partition("::")
        cpu_s, line = hottest.get((file, qualname), (0.0, 0))
        if cpu_s <= 0:
            line = _def_line(_defs_in(source_path(rootdir, file)), qualname) or 0
        lines[name] = f"{file}:{line} {qualname}" if line else f"{file} {qualname}"
    return lines


def _def_line(defs: dict[str, int], qualname: str) -> int | None:
    if qualname in defs:
        return defs[qualname]
    head, _, tail = qualname.rpartition(".<locals>.")
    if head and tail.startswith("<"):  # a genexpr or lambda, which has no def: the enclosing one
        return _def_line(defs, head)
    return None


def _defs_in(path: str) -> dict[str, int]:
    try:
        stat = os.stat(path)
    except OSError:
        return {}
    return _def_lines(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=256)
def _def_lines(path: str, mtime_ns: int, size: int) -> dict[str, int]:
    """Each function's qualified name in the file -> its def line (the first, if repeated)."""
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return {}
    found: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    found.setdefault(name, child.lineno)
                inner = f"{name}.<locals>." if not isinstance(child, ast.ClassDef) else f"{name}."
                visit(child, inner)

    visit(tree, "")
    return found


# -- files ---------------------------------------------------------------------------------------
