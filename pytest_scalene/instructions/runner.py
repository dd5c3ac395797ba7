"""The counting session: the tests that need instruction counts, run once more in a child
pytest under callgrind (child_plugin.py), and its dumps read into one `Counted` per test.

Only this child runs under valgrind (~12 s to start plus 40-120x the counted code); the user's
session runs as it would without the mode. Both sides of a comparison are counted this way.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..core.model import COUNTED_CALLS_KEY, PATHS_KEY
from ..core.runenv import COUNTING_ENV, interpreter
from . import callgrind_out
from .child_plugin import CALLS_ENV, LABEL_PREFIX, RESULTS_ENV

HASH_SEED = "0"
CALLGRIND_OPTIONS = ("--tool=callgrind", "--instr-atstart=no")
# Callgrind's defaults, pinned against a VALGRIND_OPTS that changes them: how the counts are
# split among functions, never the test's total (so not part of the counts' environment). A
# recursion's deeper activations are entries of their own, NAME'2 (callgrind_out.py).
ATTRIBUTION_OPTIONS = ("--separate-recs=2", "--separate-callers=0")
# Options of the user's invocation that shape collection and the run, kept for the child
# (with their value: the next argument, or after "=").
KEPT_OPTIONS = (
    "-p",
    "-o",
    "--override-ini",
    "-c",
    "--config-file",
    "--rootdir",
    "--confcutdir",
    "--import-mode",
    "--noconftest",
    "-W",
    "--pythonwarnings",
)
FLAGS_WITHOUT_VALUE = ("--noconftest",)


@dataclass(frozen=True)
class Counted:
    instructions: int
    functions: dict[str, int]  # "file::qualname" (profiled code only) -> inclusive count
    fingerprint: dict[str, str]


def problem() -> str | None:
    """Why counting cannot work here, or None."""
    if shutil.which("valgrind") is None:
        return (
            "valgrind is not installed (Debian/Ubuntu: apt-get install valgrind); "
            "--profile-measure=instructions and instructions budgets need it"
        )
    try:
        from .. import _callgrind
    except ImportError as exc:
        return f"pytest-scalene's _callgrind extension is missing ({exc}): reinstall it"
    if not _callgrind.available():
        return (
            "pytest-scalene was built without valgrind's client-request header "
            "(valgrind/callgrind.h): install valgrind, then reinstall pytest-scalene"
        )
    return None


def valgrind_version() -> str:
    try:
        out = subprocess.run(["valgrind", "--version"], capture_output=True, text=True, timeout=30)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def python_flags() -> list[str]:
    """-X perf where the interpreter has the perf trampoline (3.12+ on Linux): each Python
    function then gets a callgrind entry of its own."""
    return ["-X", "perf"] if hasattr(sys, "activate_stack_trampoline") else []


def environment(valgrind: str, rootdir: Path) -> dict[str, str]:
    """What the counts depend on besides the code: a mismatch makes them incomparable, but for
    where the paths lie (PATHS_KEY), which a regression's message names."""
    return {
        "python": interpreter(),
        "valgrind": valgrind,
        "callgrind_options": " ".join((*CALLGRIND_OPTIONS, *python_flags())),
        "hash_seed": HASH_SEED,
        "machine": os.uname().machine,
        PATHS_KEY: f"checkout {path_shape(rootdir)}; interpreter {path_shape(sys.prefix)}",
    }


def path_shape(path: str | os.PathLike[str]) -> str:
    """`path` resolved, as os.path.realpath walks it: its directories and characters."""
    real = os.path.realpath(path)
    return f"{real.count(os.sep)} directories, {len(real)} characters"


def kept_arguments(args: Sequence[str]) -> list[str]:
    """The user's options that the child needs to collect the same tests the same way."""
    kept: list[str] = []
    i = 0
    while i < len(args):
        arg = str(args[i])
        name = arg.split("=", 1)[0]
        if name in FLAGS_WITHOUT_VALUE:
            kept.append(arg)
        elif name in KEPT_OPTIONS:
            if "=" in arg:
                kept.append(arg)
            elif i + 1 < len(args):
                kept += [arg, str(args[i + 1])]
                i += 1
        elif arg[:2] in ("-p", "-o", "-c", "-W") and len(arg) > 2 and not arg.startswith("--"):
            kept.append(arg)  # -pNAME, -okey=value
        i += 1
    return kept


def pytest_launcher() -> list[str]:
    """How the child starts pytest: as this process did. `python -m pytest` puts the current
    directory first on sys.path; the `pytest` script does not, and then neither may the child
    (a checkout's source folder would shadow the installed, built package)."""
    if sys.argv and sys.argv[0].endswith("__main__.py"):
        return ["-m", "pytest"]
    return ["-c", "import sys; sys.path.pop(0); import pytest; sys.exit(pytest.console_main())"]


def command(
    nodeids: Sequence[str], out_dir: Path, rootdir: Path, inipath: Path | None, args: Sequence[str]
) -> list[str]:
    cmd = [
        "valgrind",
        *CALLGRIND_OPTIONS,
        *ATTRIBUTION_OPTIONS,
        "-q",
        f"--callgrind-out-file={out_dir}/callgrind.out.%p",
        sys.executable,
        *python_flags(),
        *pytest_launcher(),
        "-p",
        "no:cacheprovider",
        "-q",
        "--no-header",
        "-rN",
        f"--rootdir={rootdir}",
        f"--basetemp={out_dir / 'basetemp'}",
    ]
    if inipath is not None:
        cmd += ["-c", str(inipath)]
    cmd += kept_arguments(args)
    return [*cmd, *(str(rootdir / n) for n in nodeids)]


def count(
    nodeids: Sequence[str],
    rootdir: Path,
    inipath: Path | None,
    args: Sequence[str],
    extra: Sequence[str] = (),
    cwd: Path | None = None,
    relative_name: Callable[[str], str | None] | None = None,
    calls: Mapping[str, int] | None = None,
) -> tuple[dict[str, Counted | str], str]:
    """Count `nodeids` in a child session. Returns (per test: its counts, or why it has none;
    the child's output, for a note when the session itself failed). `calls`: the calls of the
    benchmarked function to count for a benchmark test (its baseline's)."""
    found: dict[str, Counted | str] = {}
    with tempfile.TemporaryDirectory(prefix="pytest-scalene-counts-") as tmp:
        out_dir = Path(tmp)
        results_path = out_dir / "results.json"
        env = {**os.environ, "PYTHONHASHSEED": HASH_SEED, COUNTING_ENV: "1"}
        env[RESULTS_ENV] = str(results_path)
        env[CALLS_ENV] = str(out_dir / "calls.json")
        (out_dir / "calls.json").write_text(json.dumps(dict(calls or {})), encoding="utf-8")
        env.pop("LD_PRELOAD", None)  # no allocator shim while counting
        cmd = [*command(nodeids, out_dir, rootdir, inipath, args), *extra]
        run = subprocess.run(
            cmd, cwd=cwd or rootdir, env=env, capture_output=True, text=True, errors="replace"
        )
        output = run.stdout + run.stderr
        try:
            results = json.loads(results_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            why = f"the counting session under valgrind ended with exit status {run.returncode}"
            return {n: why for n in nodeids}, output
        fingerprint = environment(valgrind_version(), rootdir)
        fingerprint.update({f"package {k}": v for k, v in results.get("packages", {}).items()})
        perf_map_path = Path(results.get("perf_map") or out_dir / "none")
        perf_map = callgrind_out.read_perf_map(perf_map_path)
        perf_map_path.unlink(missing_ok=True)  # the interpreter leaves it in /tmp
        dumps = {}
        for path in sorted(out_dir.glob("callgrind.out.*")):
            try:
                dump = callgrind_out.parse(path)
            except (OSError, ValueError):
                continue
            if dump.label.startswith(LABEL_PREFIX):
                dumps[dump.label] = dump
        for label, test in results.get("tests", {}).items():
            nodeid = test["nodeid"]
            if test["outcome"] != "passed":
                found[nodeid] = "the test did not pass in the counting session under valgrind"
            elif label not in dumps:
                found[nodeid] = "callgrind wrote no counts for it"
            else:
                functions = _named(
                    callgrind_out.python_functions(dumps[label], perf_map), relative_name
                )
                found[nodeid] = _per_call(
                    Counted(dumps[label].total, functions, fingerprint), test.get("calls")
                )
    for nodeid in nodeids:
        found.setdefault(nodeid, "the counting session did not run it")
    return found, output


def _per_call(counted: Counted, calls: object) -> Counted:
    """A benchmark test's counts of `calls` calls, per call (calls recorded in the environment)."""
    if not isinstance(calls, int) or calls < 1:
        return counted
    return Counted(
        round(counted.instructions / calls),
        {name: round(value / calls) for name, value in counted.functions.items()},
        {**counted.fingerprint, COUNTED_CALLS_KEY: str(calls)},
    )


def _named(
    functions: dict[str, int], relative_name: Callable[[str], str | None] | None
) -> dict[str, int]:
    """ "qualname:filename" -> "file::qualname" for profiled files only."""
    named: dict[str, int] = {}
    for key, value in functions.items():
        qualname, _, filename = key.partition(":")
        name = relative_name(filename) if relative_name else filename
        if name is not None:
            full = f"{name}::{qualname}"
            named[full] = named.get(full, 0) + value
    return named
