"""Baseline files: one readable JSON file per test module under baselines/.

A line is stored under its file, its function's qualified name, its offset from the function's
first line and its normalised source text, so that lines inserted above a function (which shift
every line number) still match; see line_matching.match_lines. Files are written atomically with
sorted keys so that they diff well, and read strictly: anything unexpected is a BaselineError
naming the file and the place in it.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from ..config.options import CODE_MAP_FILE
from ..core.atomic_write import locked, remove_scratch_folder, scratch_folder, write_text_atomic
from ..core.natural_values import is_number

BASELINE_SCHEMA = 1
KIND = "pytest-scalene baseline"
DIGITS = 6


def rounded(value: float) -> float:
    """A figure as stored: DIGITS decimals, and at least 4 significant digits below 0.01 (a
    benchmarked function's CPU seconds per call: benchmark/calls.py)."""
    if value == 0 or abs(value) >= 0.01:
        return round(value, DIGITS)
    return float(f"{value:.4g}")


class BaselineError(Exception):
    """A baseline file that cannot be used; str() names the file and what is wrong."""

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        super().__init__(f"baseline file {os.fspath(path)}: {reason}")
        self.path = os.fspath(path)
        self.reason = reason


@dataclass(frozen=True)
class LineEntry:
    file: str
    function: str
    offset: int  # line - the function's first line
    text: str  # normalised source text (see baseline_entry.normalise)
    line: int  # the line number when recorded (for messages only)
    metrics: dict[str, float]
    # What the line's CPU figure rests on, so that a verdict can weigh its sampling error: its
    # share of the test's CPU time and the number of samples behind it (None in files saved
    # before they were recorded). Information only: not compared, not part of equality.
    share: float | None = field(default=None, compare=False)
    samples: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class TestEntry:
    __test__ = False  # not a pytest test class

    metrics: dict[str, float]
    lines: tuple[LineEntry, ...]
    elapsed_s: float = 0.0  # wall time of the call phase: rates' noise floors depend on it
    # Instruction counts (instructions/): inclusive count per Python function ("file::qualname",
    # 3.12+), and what the counts depend on besides the code (compared: a mismatch is a note).
    functions: dict[str, int] = field(default_factory=dict)
    environment: dict[str, str] = field(default_factory=dict)
    # Where each function is shown in messages: its hottest sampled line, else its def line.
    # Not stored: only the current run's entry has it.
    function_lines: dict[str, str] = field(default_factory=dict, compare=False)
    # The CPU time as a distribution over the timed runs (min, median, p90, span_s: the wall
    # time the runs added up to, runs), and the git commit the entry was saved from ("" when
    # not in a git repository; "+dirty" when tracked files had uncommitted changes). Recorded
    # for information; absent from older files; not part of equality.
    cpu: dict[str, float] = field(default_factory=dict, compare=False)
    commit: str = field(default="", compare=False)


@dataclass(frozen=True)
class ModuleBaseline:
    module: str  # the test module's path relative to the rootdir, as in node ids
    interval_s: float
    clock: str
    repeat: int
    tests: dict[str, TestEntry]


# -- building entries from a profile -------------------------------------------------------------
def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def path_for(baseline_dir: str | os.PathLike[str], module: str) -> Path:
    """baselines/<module path>.json, kept inside the baseline directory whatever the path."""
    parts = [("_parent_" if p == ".." else p) for p in PurePosixPath(module).parts if p != "/"]
    return Path(baseline_dir, *parts[:-1], parts[-1] + ".json")


def to_dict(baseline: ModuleBaseline) -> dict[str, Any]:
    return {
        "schema": BASELINE_SCHEMA,
        "kind": KIND,
        "module": baseline.module,
        "interval_s": baseline.interval_s,
        "clock": baseline.clock,
        "repeat": baseline.repeat,
        "tests": {
            nodeid: {
                "elapsed_s": entry.elapsed_s,
                "metrics": entry.metrics,
                **_instructions_dict(entry),
                **({"cpu": entry.cpu} if entry.cpu else {}),
                **({"commit": entry.commit} if entry.commit else {}),
                "lines": [
                    {
                        "file": e.file,
                        "function": e.function,
                        "offset": e.offset,
                        "text": e.text,
                        "line": e.line,
                        "metrics": e.metrics,
                        **({"share": e.share} if e.share is not None else {}),
                        **({"samples": e.samples} if e.samples is not None else {}),
                    }
                    for e in entry.lines
                ],
            }
            for nodeid, entry in baseline.tests.items()
        },
    }


def _instructions_dict(entry: TestEntry) -> dict[str, Any]:
    """Present only for counted tests, so that other baselines keep their bytes."""
    if not entry.environment and not entry.functions:
        return {}
    return {"instructions": {"environment": entry.environment, "functions": entry.functions}}


def dumps(baseline: ModuleBaseline) -> str:
    return json.dumps(to_dict(baseline), indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def write(baseline_dir: str | os.PathLike[str], baseline: ModuleBaseline) -> Path:
    path = path_for(baseline_dir, baseline.module)
    write_text_atomic(path, dumps(baseline), scratch=scratch_folder(baseline_dir))
    return path


# -- strict reading ------------------------------------------------------------------------------
class _Reader:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = path

    def fail(self, where: str, problem: str) -> BaselineError:
        return BaselineError(self.path, f"{where}: {problem}" if where else problem)

    def obj(self, value: Any, where: str, keys: Iterable[str], optional: Iterable[str] = ()):
        if not isinstance(value, dict):
            raise self.fail(where, f"expected an object, got {_kind(value)}")
        required, allowed = set(keys), set(keys) | set(optional)
        missing = sorted(required - value.keys())
        if missing:
            raise self.fail(where, f"missing key {missing[0]!r}")
        extra = sorted(str(k) for k in value.keys() - allowed)
        if extra:
            raise self.fail(where, f"unexpected key {extra[0]!r} (edited by hand?)")
        return value

    def mapping(self, value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, f"expected an object, got {_kind(value)}")
        return value

    def string(self, value: Any, where: str) -> str:
        if not isinstance(value, str):
            raise self.fail(where, f"expected a string, got {_kind(value)}")
        return value

    def integer(self, value: Any, where: str, minimum: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.fail(where, f"expected a whole number >= {minimum}, got {_show(value)}")
        return value

    def number(self, value: Any, where: str, positive: bool = False) -> float:
        ok = is_number(value)
        try:
            number = float(value) if ok else math.nan
        except OverflowError:
            number = math.inf
        if not ok or not math.isfinite(number) or number < 0 or (positive and number == 0):
            sign = "positive" if positive else "non-negative"
            raise self.fail(where, f"expected a finite {sign} number, got {_show(value)}")
        return number

    def metrics(self, value: Any, where: str) -> dict[str, float]:
        if not isinstance(value, dict):
            raise self.fail(where, f"expected an object, got {_kind(value)}")
        return {name: self.number(v, f"{where}.{name}") for name, v in value.items()}

    def cpu(self, value: Any, where: str) -> dict[str, float]:
        """The CPU time's distribution; its count of runs stays whole, so that an entry kept
        through a re-save is written back byte for byte."""
        found = self.metrics(value, where)
        if "runs" in found:
            found["runs"] = self.integer(value["runs"], f"{where}.runs", 0)
        return found

    def line(self, value: Any, where: str) -> LineEntry:
        keys = ("file", "function", "offset", "text", "line", "metrics")
        data = self.obj(value, where, keys, ("share", "samples"))
        share = data.get("share")
        samples = data.get("samples")
        return LineEntry(
            file=self.string(data["file"], f"{where}.file"),
            function=self.string(data["function"], f"{where}.function"),
            offset=self.integer(data["offset"], f"{where}.offset", -(2**31)),
            text=self.string(data["text"], f"{where}.text"),
            line=self.integer(data["line"], f"{where}.line", 0),
            metrics=self.metrics(data["metrics"], f"{where}.metrics"),
            share=None if share is None else self.number(share, f"{where}.share"),
            samples=None if samples is None else self.integer(samples, f"{where}.samples", 0),
        )

    def test(self, value: Any, where: str) -> TestEntry:
        optional = ("instructions", "cpu", "commit")
        data = self.obj(value, where, ("elapsed_s", "metrics", "lines"), optional)
        lines = data["lines"]
        if not isinstance(lines, list):
            raise self.fail(f"{where}.lines", f"expected a list, got {_kind(lines)}")
        functions: dict[str, int] = {}
        environment: dict[str, str] = {}
        if "instructions" in data:
            at = f"{where}.instructions"
            counted = self.obj(data["instructions"], at, ("environment", "functions"))
            raw_env = self.mapping(counted["environment"], f"{at}.environment")
            environment = {k: self.string(v, f"{at}.environment.{k}") for k, v in raw_env.items()}
            raw_functions = self.mapping(counted["functions"], f"{at}.functions")
            functions = {
                k: self.integer(v, f"{at}.functions[{k!r}]", 0) for k, v in raw_functions.items()
            }
        return TestEntry(
            self.metrics(data["metrics"], f"{where}.metrics"),
            tuple(self.line(v, f"{where}.lines[{i}]") for i, v in enumerate(lines)),
            self.number(data["elapsed_s"], f"{where}.elapsed_s"),
            functions,
            environment,
            cpu=self.cpu(data.get("cpu", {}), f"{where}.cpu"),
            commit=self.string(data.get("commit", ""), f"{where}.commit"),
        )

    def module(self, value: Any) -> ModuleBaseline:
        if isinstance(value, dict) and "schema" in value:
            schema = value["schema"]
            if isinstance(schema, int) and not isinstance(schema, bool) and schema > 1:
                raise self.fail(
                    "",
                    f"written by a newer pytest-scalene (baseline schema {schema}; this version "
                    f"reads schema {BASELINE_SCHEMA}): upgrade pytest-scalene, or re-create the "
                    "baseline with --profile-save-baseline",
                )
        keys = ("schema", "kind", "module", "interval_s", "clock", "repeat", "tests")
        data = self.obj(value, "", keys)
        if data["schema"] != BASELINE_SCHEMA or isinstance(data["schema"], bool):
            raise self.fail("schema", f"expected {BASELINE_SCHEMA}, got {_show(data['schema'])}")
        if data["kind"] != KIND:
            raise self.fail("kind", f"expected {KIND!r}, got {_show(data['kind'])}")
        module = self.string(data["module"], "module")
        tests = data["tests"]
        if not isinstance(tests, dict):
            raise self.fail("tests", f"expected an object, got {_kind(tests)}")
        for nodeid in tests:
            if not nodeid.startswith(module + "::"):
                raise self.fail(f"tests[{nodeid!r}]", f"is not a test of module {module!r}")
        return ModuleBaseline(
            module=module,
            interval_s=self.number(data["interval_s"], "interval_s", positive=True),
            clock=self.string(data["clock"], "clock"),
            repeat=self.integer(data["repeat"], "repeat", 1),
            tests={k: self.test(v, f"tests[{k!r}]") for k, v in tests.items()},
        )


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    return names.get(type(value), "a number" if isinstance(value, (int, float)) else "a value")


def _show(value: Any) -> str:
    text = json.dumps(value) if isinstance(value, (str, int, float, bool, type(None))) else None
    return text if text is not None and len(text) <= 40 else _kind(value)


def loads(data: str | bytes, path: str | os.PathLike[str]) -> ModuleBaseline:
    """Parse one baseline file's content; any problem is a BaselineError naming `path`."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BaselineError(path, f"not UTF-8 text (corrupt?): {exc}") from None
    if not data.strip():
        raise BaselineError(path, "empty file (truncated?)")
    try:
        value = json.loads(data)
    except json.JSONDecodeError as exc:
        raise BaselineError(path, f"not valid JSON (truncated or corrupt?): {exc}") from None
    except RecursionError:
        raise BaselineError(path, "not a baseline: JSON nested too deeply") from None
    return _Reader(path).module(value)


def read(path: str | os.PathLike[str]) -> ModuleBaseline:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise BaselineError(path, f"cannot be read: {exc.strerror or exc}") from None
    return loads(data, path)


def load_dir(baseline_dir: str | os.PathLike[str]) -> tuple[dict[str, ModuleBaseline], list[str]]:
    """Every baseline under `baseline_dir` by module, and one message per unusable file."""
    found: dict[str, ModuleBaseline] = {}
    errors: list[str] = []
    root = Path(baseline_dir)
    for path in sorted(root.rglob("*.json")):
        if path == root / CODE_MAP_FILE:  # selection/code_map.py's, not a baseline
            continue
        try:
            baseline = read(path)
            expected = path_for(root, baseline.module)
            if expected != path:
                raise BaselineError(
                    path,
                    f"holds the baseline of module {baseline.module!r}, which belongs in "
                    f"{expected} (moved or renamed by hand?)",
                )
        except BaselineError as exc:
            errors.append(str(exc))
            continue
        found[baseline.module] = baseline
    return found, errors


UNCHANGED = "every test within noise of the stored figures: file left as it was"


def save(
    baseline_dir: str | os.PathLike[str],
    entries: dict[str, TestEntry],
    interval_s: float,
    clock: str,
    repeat: int,
    keep: Callable[[TestEntry, TestEntry], bool] | None = None,
) -> list[tuple[Path, int, str | None]]:
    """Write the entries, one file per module, keeping the stored tests that did not run now.
    `keep(stored, new)`: keep the stored entry instead (figures within noise); a file in which
    every entry is kept, with the same interval and clock, is left as it is (byte-identical).
    Returns (path, tests written, warning) per file."""
    by_module: dict[str, dict[str, TestEntry]] = {}
    for nodeid, entry in entries.items():
        by_module.setdefault(module_of(nodeid), {})[nodeid] = entry
    with locked(baseline_dir):  # another run may be saving into this directory now
        try:
            return [
                _save_module(baseline_dir, module, tests, interval_s, clock, repeat, keep)
                for module, tests in sorted(by_module.items())
            ]
        finally:  # with what a killed save left there; nobody else is writing now
            remove_scratch_folder(baseline_dir)


def _save_module(
    baseline_dir: str | os.PathLike[str],
    module: str,
    tests: dict[str, TestEntry],
    interval_s: float,
    clock: str,
    repeat: int,
    keep: Callable[[TestEntry, TestEntry], bool] | None,
) -> tuple[Path, int, str | None]:
    path = path_for(baseline_dir, module)
    kept: dict[str, TestEntry] = {}
    warning = None
    stored: ModuleBaseline | None = None
    if path.exists():
        try:
            stored = read(path)
            kept = stored.tests
        except BaselineError as exc:
            warning = f"replaced an unreadable file ({exc.reason})"
    if keep is not None:
        tests = {n: e for n, e in tests.items() if n not in kept or not keep(kept[n], e)}
        same_settings = stored is not None and (stored.interval_s, stored.clock) == (
            interval_s,
            clock,
        )
        if same_settings and not tests:
            return path, 0, UNCHANGED
    merged = {**kept, **tests}
    baseline = ModuleBaseline(module, interval_s, clock, repeat, dict(sorted(merged.items())))
    return write(baseline_dir, baseline), len(tests), warning
