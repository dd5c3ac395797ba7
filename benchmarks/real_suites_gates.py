"""The regression gates on third-party projects' own test suites, with regressions injected into
their source: false failures on unchanged code, slowdowns caught and named, leaks reported at
their line, and each mode's cost against plain pytest. docs/benchmarks-real-suites.md holds the
results and how to read them.

Each suite is a pinned sdist (pip download, as scripts/real_suites.py does), unpacked into a git
repository of its own (the A/B mode compares the working tree with HEAD). Injections edit one
hot function of the suite's package, found by its qualified name:
- slow-1.2 / slow-1.5: at the end of each outermost call, an empty loop inside the function
  itself (so that it, not a helper, is the culprit) that costs 0.2 (0.5) times the thread CPU
  time the call took, counted in iterations (RATE_SOURCE), less the cost of the two clock reads.
  The real factor is measured with timeit on the thread's CPU clock (a BLAS pool's spinning
  threads count in the process's), the slowdown turned off (no clock reads) and on in turn in
  one process, the median over rounds; a call shorter than ~11 us reads slower than asked;
- leak: each call keeps 100 KB in a module-level list;
- copy: each call copies its input once more (where the suite has a copy to double).

Modes: stored (`--profile-save-baseline`, then `--profile-compare`), instructions
(`--profile-measure=instructions`, same), ab (`--profile-compare-ref=HEAD`) and history
(`--profile-history` runs, then `--profile-compare-history`). A test counts as caught when it
fails with a regression verdict, and as named when a failing verdict names the function.

    .venv/bin/python benchmarks/real_suites_gates.py --quick
    .venv/bin/python benchmarks/real_suites_gates.py --suites sqlparse --modes ab --unchanged 5

Run it with the Python of a virtual environment that has pytest-scalene and the suites' test
dependencies installed (benchmarks/requirements-real-suites.txt).
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "real_suites.py"
_spec = importlib.util.spec_from_file_location("real_suites", _SCRIPT)
assert _spec is not None and _spec.loader is not None
real_suites = importlib.util.module_from_spec(_spec)
sys.modules["real_suites"] = real_suites
_spec.loader.exec_module(real_suites)

SHARE_FLOOR = 0.20  # tests that spend at least this share of their CPU time in the function
LEAK_BYTES = 100_000
MARK = "# pytest-scalene benchmark injection"


@dataclass(frozen=True)
class Target:
    file: str  # the module's path in the sdist
    function: str  # its qualified name: "group" or "JSONDecoder.decode"
    module: str  # its import name, for timeit and the share plugin
    timeit_setup: str  # imports and data for timeit
    timeit_call: str  # one representative call
    copy: str = ""  # a statement at the top of the body that copies the input once more
    # The function the leak goes in, when not `function`: the suite's most called one (a leak
    # of 100 KB per call in a function called 9 times in the whole suite keeps under 1 MB).
    leak_function: str = ""


@dataclass(frozen=True)
class GateSuite:
    suite: Any  # real_suites.Suite: name, version, kind, pythonpath, args
    target: Target
    build: tuple[str, ...] = ()  # a command run once in the unpacked sdist (C extensions)


SUITES = {
    s.suite.name: s
    for s in (
        GateSuite(
            real_suites.Suite("sqlparse", "0.5.3", "pure-Python SQL parser", args=("tests",)),
            Target(
                "sqlparse/engine/grouping.py",
                "group",
                "sqlparse.engine.grouping",
                "import sqlparse\nsql = 'select a, b as c from t where x = 1 and y in (1, 2)'",
                "sqlparse.parse(sql)",
            ),
        ),
        GateSuite(
            real_suites.Suite("numpy-financial", "1.0.0", "numpy"),
            Target(
                "numpy_financial/_financial.py",
                "pmt",
                "numpy_financial._financial",
                "import numpy_financial as npf",
                "npf.pmt(0.075 / 12, 12 * 15, 200_000)",
                copy="rate, nper, pv = (np.array(x, copy=True) for x in (rate, nper, pv))",
                leak_function="_convert_when",  # 201 calls in the suite; pmt 76
            ),
        ),
        GateSuite(
            real_suites.Suite(
                "simplejson", "3.20.1", "C extension (_speedups)", args=("simplejson/tests",)
            ),
            Target(
                "simplejson/decoder.py",
                "JSONDecoder.decode",
                "simplejson.decoder",
                "import simplejson\ns = simplejson.dumps({'a': list(range(50)), 'b': 'x' * 200})",
                "simplejson.loads(s)",
                copy="s = s[:1] + s[1:]",
            ),
            build=("setup.py", "build_ext", "--inplace"),
        ),
        GateSuite(
            real_suites.Suite(
                "filelock", "3.16.1", "threads and file I/O", pythonpath="src", args=("tests",)
            ),
            Target(
                "src/filelock/_api.py",
                "BaseFileLock.acquire",
                "filelock._api",
                "import filelock, tempfile, os\n"
                "lock = filelock.FileLock(os.path.join(tempfile.mkdtemp(), 'a.lock'))",
                "lock.acquire(); lock.release()",
            ),
        ),
    )
}
QUICK = {"suites": ("sqlparse", "numpy-financial"), "modes": ("stored", "ab"), "unchanged": 2}
MODES = ("stored", "instructions", "ab", "history")
# A/B (~2-10 s per test) and instruction counts (40-120x) run on a subset of each suite: the
# tests that spend the most in the target (half), then an even spread of the others.
COSTLY_MODES = ("instructions", "ab")


def subset(shares: dict[str, float], size: int) -> list[str]:
    """`size` node ids: the half with the largest shares, then every k-th of the rest."""
    ranked = sorted(shares, key=lambda n: (-shares[n], n))
    top = ranked[: size // 2]
    rest = sorted(ranked[size // 2 :])
    step = max(1, len(rest) // max(1, size - len(top)))
    return sorted(top + rest[::step][: size - len(top)])


# -- injections ---------------------------------------------------------------------------------
def _function_node(tree: ast.Module, qualname: str) -> ast.FunctionDef:
    scope: Any = tree
    for part in qualname.split("."):
        found = [
            n
            for n in scope.body
            if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == part
        ]
        if not found:
            raise LookupError(f"{qualname}: no {part!r} in its scope")
        scope = found[-1]
    if not isinstance(scope, ast.FunctionDef):
        raise LookupError(f"{qualname} is not a function")
    return scope


def _body_start(node: ast.FunctionDef) -> int:
    """The 0-based index of the body's first line after the docstring."""
    first = node.body[0]
    is_doc = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
    if is_doc and isinstance(first.value.value, str) and len(node.body) > 1:
        return node.body[1].lineno - 1
    return first.lineno - 1


# How many iterations of an empty loop cost `seconds` of CPU time, less what the two reads of
# the thread's CPU clock around the call cost (1.1 us each here: a 10 us call would read slower
# by them alone). Measured again every 0.2 s (0.3 ms each time): the two CPUs here are shared,
# and the same loop's speed moves with what runs beside it. Counted iterations cost CPU time
# whatever the load; a spin on a clock would not (preempted, it ends having used less CPU).
RATE_SOURCE = """
_pss_calibration = [0.0, 0.0, -1.0]  # iterations per CPU second, a clock read's cost, when
def _pss_iterations(seconds):
    now = _pss_time.perf_counter()
    if now - _pss_calibration[2] > 0.2:
        start = _pss_time.thread_time()
        for _pss_i in range(20000):
            pass
        middle = _pss_time.thread_time()
        for _pss_i in range(100):
            _pss_time.thread_time()
        end = _pss_time.thread_time()
        if middle > start:
            _pss_calibration[0] = 20000 / (middle - start)
        _pss_calibration[1] = (end - middle) / 100
        _pss_calibration[2] = now
    return max(0, int((seconds - 2 * _pss_calibration[1]) * _pss_calibration[0]))
"""


def inject(directory: Path, target: Target, kind: str, iterations: int | None = None) -> int:
    """Edit the target function in place; returns the 1-based line of the injected statement
    (the leak's allocation, the copy, or the spin loop). A slowdown's spin is sized by the CPU
    time each call took, or is `iterations` per call where given (the same work every time, as
    a real regression adds: a spin sized by time makes an instruction count timing-dependent)."""
    path = directory / target.file
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    function = target.leak_function if kind == "leak" and target.leak_function else target.function
    node = _function_node(ast.parse("".join(lines)), function)
    start = _body_start(node)
    indent = lines[start][: len(lines[start]) - len(lines[start].lstrip())]
    # _pss_on: timeit turns the slowdown off and on in one process (real_factor).
    tail = [f"\nimport time as _pss_time  {MARK}\n_pss_leaked = []\n_pss_depth = [0]\n"]
    tail.append("_pss_on = [True]\n")
    tail.append(RATE_SOURCE)
    if kind == "leak":
        added = [f"_pss_leaked.append(bytearray({LEAK_BYTES}))  {MARK}\n"]
        at = 0
    elif kind == "copy":
        if not target.copy:
            raise LookupError(f"{function}: no copy to double in this suite")
        added, at = [f"{target.copy}  {MARK}\n"], 0
    elif kind.startswith("slow-"):
        factor = float(kind.split("-", 1)[1])
        end = node.end_lineno or node.lineno
        body = ["    " + line if line.strip() else line for line in lines[start:end]]
        spin = [
            f"_pss_depth[0] += 1  {MARK}\n",
            "_pss_t0 = _pss_time.thread_time() if _pss_on[0] and _pss_depth[0] == 1 else 0.0\n",
            "try:\n",
        ]
        after = [
            "finally:\n",
            "    _pss_depth[0] -= 1\n",
            "    if not _pss_depth[0] and _pss_on[0]:\n",
            f"        _pss_spins = (_pss_time.thread_time() - _pss_t0) * {factor - 1:.3f}\n",
            "        for _pss_i in range(_pss_iterations(_pss_spins)):\n",
            "            pass\n",
        ]
        if iterations is not None:
            after[3:5] = [f"        for _pss_i in range({iterations}):\n"]
        lines[start:end] = [indent + x for x in spin] + body + [indent + x for x in after]
        path.write_text("".join(lines) + "".join(tail), encoding="utf-8")
        return start + len(spin) + len(body) + len(after) - 1  # the spin loop's line
    else:
        raise ValueError(kind)
    lines[start + at : start + at] = [indent + a for a in added]
    path.write_text("".join(lines) + "".join(tail), encoding="utf-8")
    return start + at + 1


def _git(directory: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=directory, capture_output=True, text=True, check=True)
    return done.stdout


def prepare(gate: GateSuite, cache: Path, work: Path) -> Path:
    """The unpacked, built sdist as a git repository with one commit."""
    directory = real_suites.fetch(gate.suite, cache / "sdists", work)
    if gate.build and not (directory / ".pss-built").exists():
        subprocess.run(
            [sys.executable, *gate.build], cwd=directory, check=True, capture_output=True
        )
        (directory / ".pss-built").write_text("")
    if not (directory / ".git").exists():
        (directory / ".gitignore").write_text("baselines/\n.scalene/\n__pycache__/\n")
        _git(directory, "init", "-q")
        _git(directory, "add", "-A")
        _git(directory, "-c", "user.email=b@x", "-c", "user.name=bench", "commit", "-qm", "sdist")
    return directory


def restore(directory: Path) -> None:
    _git(directory, "checkout", "-q", "--", ".")


# -- measurements -------------------------------------------------------------------------------
def _timed_target(gate: GateSuite) -> str:
    """Source that sets the representative call up as `timer` (timeit, on the thread's CPU
    clock) with the target wrapped: `inside` holds its inclusive CPU time, the call depth and
    the number of outermost calls."""
    owner, _, name = gate.target.function.rpartition(".")
    return f"""
import statistics, sys, time, timeit
{gate.target.timeit_setup}
module = sys.modules[{gate.target.module!r}]
owner = module
for part in {owner!r}.split(".") if {owner!r} else ():
    owner = getattr(owner, part)
original = owner.__dict__[{name!r}]
inside = [0.0, 0, 0]  # inclusive CPU time in the function, depth, outermost calls

def timed(*args, **kwargs):
    inside[1] += 1
    start = time.thread_time()
    try:
        return original(*args, **kwargs)
    finally:
        inside[1] -= 1
        if not inside[1]:
            inside[0] += time.thread_time() - start
            inside[2] += 1

setattr(owner, {name!r}, timed)
for other in list(sys.modules.values()):  # names bound by `from ... import`
    if other is sys.modules["__main__"]:
        continue  # here `original` must stay the function
    for key, value in list(getattr(other, "__dict__", {{}}).items()):
        if value is original:
            setattr(other, key, timed)
timer = timeit.Timer({gate.target.timeit_call!r}, globals=globals(), timer=time.thread_time)
number = max(1, int(0.02 / min(timer.repeat(repeat=3, number=1))))
"""


def _run_python(directory: Path, gate: GateSuite, code: str) -> list[float]:
    env = dict(os.environ, PYTHONPATH=str(directory / gate.suite.pythonpath))
    try:
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=directory,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
    finally:
        restore(directory)
    return [float(x) for x in done.stdout.split()]


def real_factor(
    directory: Path, gate: GateSuite, kind: str, rounds: int = 25, iterations: int | None = None
) -> tuple[float, float]:
    """The injected slowdown as timeit sees it: of the function itself (its inclusive time
    within the representative call, on the thread's CPU clock) and of the whole call. In one
    process with the slowdown turned off and on in turn (a shared machine's load moves both
    alike): the median over rounds of the ratio of each round's best."""
    inject(directory, gate.target, kind, iterations)
    code = (
        _timed_target(gate)
        + f"""
calls, functions = [], []
for _ in range({rounds}):
    call, function = [], []
    for on in (False, True):
        module._pss_on[0] = on
        best_call = best_function = float("inf")
        for _ in range(3):
            inside[0] = 0.0
            best_call = min(best_call, timer.timeit(number))
            best_function = min(best_function, inside[0])
        call.append(best_call)
        function.append(best_function)
    calls.append(call[1] / call[0])
    functions.append(function[1] / function[0])
print(statistics.median(functions), statistics.median(calls))
"""
    )
    function, call = _run_python(directory, gate, code)
    return function, call


def fixed_iterations(directory: Path, gate: GateSuite, kind: str) -> int:
    """The spin's iterations per call that make the function `factor` times slower in the
    representative call, as timeit reads it: the same work in every call."""
    factor = float(kind.split("-", 1)[1])
    restore(directory)
    code = (
        _timed_target(gate)
        + """
def spin(n):  # as the injected loop runs: in a function, on a local
    for _pss_i in range(n):
        pass

per_call, rates = [], []
for _ in range(15):
    inside[0], inside[2] = 0.0, 0
    timer.timeit(number)
    per_call.append(inside[0] / max(1, inside[2]))
    start = time.thread_time()
    spin(200_000)
    rates.append(200_000 / (time.thread_time() - start))
print(statistics.median(per_call), statistics.median(rates))
"""
    )
    per_call, rate = _run_python(directory, gate, code)
    first = max(1, round((factor - 1) * per_call * rate))
    # Scaled once by what timeit reads with it in place (the injected loop and the function's
    # own time do not compare exactly: the try/finally around the body, its clock reads).
    read = real_factor(directory, gate, kind, rounds=9, iterations=first)[0]
    return max(1, round(first * (factor - 1) / max(read - 1, 0.01)))


SHARE_PLUGIN = """
import json, os, sys, threading, time, importlib
import pytest

_state = threading.local()
_main = threading.main_thread()  # the thread that runs the test: see THREADS_NOTE
_spent = {}
_current = [None]

def _wrap(func):
    def timed(*args, **kwargs):
        if getattr(_state, "depth", 0) or threading.current_thread() is not _main:
            return func(*args, **kwargs)
        _state.depth = 1
        start = time.thread_time()
        try:
            return func(*args, **kwargs)
        finally:
            _state.depth = 0
            if _current[0] is not None:
                _spent[_current[0]] = _spent.get(_current[0], 0.0) + time.thread_time() - start
    timed.__wrapped__ = func
    return timed

def pytest_configure(config):
    module = importlib.import_module(os.environ["PSS_MODULE"])
    owner, name = module, os.environ["PSS_FUNCTION"]
    for part in name.split(".")[:-1]:
        owner = getattr(owner, part)
    last = name.split(".")[-1]
    original = owner.__dict__[last]
    wrapped = _wrap(original)
    setattr(owner, last, wrapped)
    for other in list(sys.modules.values()):  # names bound by `from ... import`
        for key, value in list(getattr(other, "__dict__", {}).items()):
            if value is original:
                setattr(other, key, wrapped)

_cpu = {}

@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    _current[0] = item.nodeid
    start = time.process_time()
    try:
        return (yield)
    finally:
        _cpu[item.nodeid] = time.process_time() - start
        _current[0] = None

def pytest_sessionfinish(session):
    shares = {n: min(1.0, _spent.get(n, 0.0) / c) for n, c in _cpu.items() if c > 0}
    with open(os.environ["PSS_SHARES"], "w") as f:
        json.dump(shares, f)
"""


@dataclass
class Run:
    rc: int | None
    wall_s: float
    cpu_s: float
    output: str
    tests: dict[str, dict[str, Any]] = field(default_factory=dict)  # the profile JSON's


def pytest_run(
    directory: Path,
    gate: GateSuite,
    args: tuple[str, ...],
    nodeids: list[str] | None = None,
    env_extra: dict[str, str] | None = None,
    plugin: str = "",
    timeout_s: float = 7200,
) -> Run:
    with tempfile.TemporaryDirectory(prefix="pss-gates-") as scratch:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHON"))}
        # The package's own folder through pytest's `pythonpath` (relative to each tree's
        # rootdir), not PYTHONPATH: with PYTHONPATH both A/B sides would import the working
        # tree's copy, and the A/B mode refuses to compare (a usage error, as it should).
        env["PYTHONPATH"] = scratch
        env["COLUMNS"] = "200"  # the summary's lines unwrapped
        env.update(env_extra or {})
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rN"]
        command += ["-o", f"pythonpath={gate.suite.pythonpath}"]
        if plugin:
            Path(scratch, "pss_plugin.py").write_text(plugin)
            command += ["-p", "pss_plugin"]
        profile = Path(scratch, "profile.json")
        if any(a.startswith("--profile") for a in args):
            command.append(f"--profile-json={profile}")
        command += ["-W", real_suites.EDITABLE_WARNING, *args]
        command += nodeids if nodeids else gate.suite.args
        start, cpu = time.perf_counter(), real_suites._children_cpu()
        try:
            done = subprocess.run(
                command, cwd=directory, env=env, capture_output=True, text=True, timeout=timeout_s
            )
            rc, output = done.returncode, done.stdout + done.stderr
        except subprocess.TimeoutExpired as exc:
            rc, output = None, real_suites._text(exc.stdout)
        run = Run(rc, time.perf_counter() - start, real_suites._children_cpu() - cpu, output)
        if profile.exists():
            run.tests = json.loads(profile.read_text()).get("tests", {})
        return run


# THREADS_NOTE: the share counts the target's time on the thread that runs the test only. In
# other threads the time need not add up: filelock's contention tests spend 85% of their CPU
# in `acquire` across 20 threads, yet under its 1.2x slowdown they used 1.02x and 1.06x the
# CPU time of plain pytest (medians of 5 interleaved plain runs): the threads polled less while
# one spun. No CPU gate can catch a slowdown the test does not pay.
def shares(
    directory: Path,
    gate: GateSuite,
    nodeids: list[str] | None = None,
    args: tuple[str, ...] = (),
) -> dict[str, float]:
    """Each test's share of its call's CPU time spent inside the target (inclusive), on the
    test's own thread (THREADS_NOTE)."""
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch, "shares.json")
        env = {
            "PSS_MODULE": gate.target.module,
            "PSS_FUNCTION": gate.target.function,
            "PSS_SHARES": str(out),
        }
        pytest_run(directory, gate, args, nodeids, env_extra=env, plugin=SHARE_PLUGIN)
        return json.loads(out.read_text()) if out.exists() else {}


def failed_verdicts(run: Run) -> dict[str, list[dict[str, Any]]]:
    return {
        nodeid: [v for v in test.get("verdicts", []) if not v.get("passed", True)]
        for nodeid, test in run.tests.items()
        if any(not v.get("passed", True) for v in test.get("verdicts", []))
    }


def not_judged(run: Run) -> int:
    """Passing tests the run's gate could not judge, as its last lines count them."""
    found = re.search(r"(\d+) passing test\(s\) not judged", run.output)
    return int(found.group(1)) if found else 0


# The judged runs measure every test of the subset (--profile-select=all): with the code map's
# selection an unchanged run measures nothing, and would pass whatever the comparison's noise.
# Selection is benchmarked on its own (selection_real_suite.py).
MODE_ARGS = {
    "stored": (("--profile", "--profile-save-baseline"), ("--profile", "--profile-compare")),
    "instructions": (
        ("--profile-measure=instructions", "--profile-save-baseline"),
        ("--profile-measure=instructions", "--profile-compare", "--profile-select=all"),
    ),
    "ab": ((), ("--profile", "--profile-compare-ref=HEAD", "--profile-select=all")),
    "history": (
        ("--profile", "--profile-history=.scalene/history.db"),
        ("--profile", "--profile-history=.scalene/history.db", "--profile-compare-history"),
    ),
}
HISTORY_RUNS = 5  # recorded before the first judged run
# Modes whose slowdowns spin a fixed count per call: a count is judged only where it is the
# same in two counting sessions, and a spin sized by each call's CPU time is not.
FIXED_SPIN_MODES = ("instructions",)


@dataclass
class ModeResult:
    suite: str
    mode: str
    tests: int = 0  # the subset's size; 0: the whole suite
    unchanged_runs: int = 0
    false_failures: list[str] = field(default_factory=list)  # "run k: nodeid: message"
    not_judged: int = 0
    rc_unchanged: list[int | None] = field(default_factory=list)
    cost: float = 0.0  # wall time of one judged run over plain pytest's
    caught: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # kind: caught, named, of
    # kind: the spin's iterations per call and the function's factor by timeit, where the
    # injection was a fixed count (FIXED_SPIN_MODES)
    fixed: dict[str, tuple[int, float]] = field(default_factory=dict)


def run_mode(
    directory: Path,
    gate: GateSuite,
    mode: str,
    unchanged: int,
    hot: set[str],
    plain_wall: float,
    nodeids: list[str] | None = None,
    called: set[str] = frozenset(),
) -> ModeResult:
    """`hot`: the tests that spend >= SHARE_FLOOR in the target; `called`: every test that calls
    it; `nodeids`: the subset to run (None: the whole suite); `plain_wall`: plain pytest's wall
    time for the same tests."""
    result = ModeResult(gate.suite.name, mode, tests=len(nodeids) if nodeids else 0)
    if nodeids:
        hot = hot & set(nodeids)
    save, compare = MODE_ARGS[mode]
    shutil.rmtree(directory / "baselines", ignore_errors=True)
    shutil.rmtree(directory / ".scalene", ignore_errors=True)
    restore(directory)
    for _ in range(HISTORY_RUNS if mode == "history" else 1 if save else 0):
        pytest_run(directory, gate, save, nodeids)
    walls = []
    for k in range(unchanged):
        run = pytest_run(directory, gate, compare, nodeids)
        walls.append(run.wall_s)
        result.unchanged_runs += 1
        result.rc_unchanged.append(run.rc)
        result.not_judged += not_judged(run)
        for nodeid, verdicts in failed_verdicts(run).items():
            result.false_failures.append(f"run {k + 1}: {nodeid}: {verdicts[0]['message'][:160]}")
    result.cost = sorted(walls)[len(walls) // 2] / plain_wall if walls else 0.0
    kinds = ["slow-1.2", "slow-1.5"]
    if mode == "stored" and gate.target.copy:
        kinds.append("copy")  # copy volume is judged against stored figures only
    for kind in kinds:
        iterations = None
        if mode in FIXED_SPIN_MODES and kind.startswith("slow-"):
            iterations = fixed_iterations(directory, gate, kind)
            factor = real_factor(directory, gate, kind, iterations=iterations)[0]
            result.fixed[kind] = (iterations, factor)
        inject(directory, gate.target, kind, iterations)
        try:
            run = pytest_run(directory, gate, compare, nodeids)
        finally:
            restore(directory)
        failing = failed_verdicts(run)
        if kind == "copy":  # judged in every test that calls the function, on the copy metrics
            failing = {
                n: [v for v in found if v.get("metric", "").startswith("copy")]
                for n, found in failing.items()
            }
            failing = {n: found for n, found in failing.items() if found}
        targets = called if kind == "copy" else hot
        name = gate.target.function.split(".")[-1]
        caught = [n for n in targets if n in failing]
        named = [n for n in caught if any(name in (v.get("message") or "") for v in failing[n])]
        result.caught[kind] = (len(caught), len(named), len(targets))
    return result


LEAK_SECTIONS = ("Likely leaks", "Memory retained across tests")


def leak_section(output: str, title: str = LEAK_SECTIONS[0]) -> list[str]:
    """The lines of one of the terminal summary's leak lists (up to its blank line)."""
    lines = output.splitlines()
    start = next((i for i, s in enumerate(lines) if s.startswith(title)), None)
    if start is None:
        return []
    found = []
    for text in lines[start + 1 :]:
        if not text.strip():
            break
        found.append(text.strip())
    return found


def leak_check(directory: Path, gate: GateSuite) -> dict[str, Any]:
    """--profile on the leaking tree: is the injected line in the terminal's leak list, and
    does the unchanged tree list any leak?"""
    restore(directory)
    clean = pytest_run(directory, gate, ("--profile",))
    line = inject(directory, gate.target, "leak")
    try:
        leaking = pytest_run(directory, gate, ("--profile",))
    finally:
        restore(directory)
    where = f"{gate.target.file}:{line}"
    found = {t: [s for s in leak_section(leaking.output, t) if where in s] for t in LEAK_SECTIONS}
    clean_leaks = [s for s in leak_section(clean.output) if ":" in s and "probability" in s]
    return {
        "line": where,
        "in_terminal": [s for t in LEAK_SECTIONS for s in found[t]][:3],
        "sections": [t for t in LEAK_SECTIONS if found[t]],
        "unchanged_flagged": clean_leaks[:5],
    }


def _statuses(statuses: list[int | None]) -> str:
    """Exit statuses other than pytest's own verdicts (0 passed, 1 failed): a run that could
    not judge (7), a usage error (4), a crash or a hang (None) is never counted as a pass."""
    odd = sorted({s for s in statuses if s not in (0, 1)}, key=str)
    return f" (**exit status {', '.join(map(str, odd))}**)" if odd else ""


def markdown(
    results: list[ModeResult],
    factors: dict[str, dict[str, tuple[float, float]]],
    leaks: dict[str, dict[str, Any]],
    plain: dict[str, float],
) -> str:
    rows = [
        "| suite | mode | unchanged runs | false failures | not judged | 1.2x caught / named / "
        "tests >= 20% | 1.5x caught / named / tests | cost vs plain | copy: caught / calling "
        "tests |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        c12, c15 = r.caught.get("slow-1.2", (0, 0, 0)), r.caught.get("slow-1.5", (0, 0, 0))
        copy = r.caught.get("copy")
        rows.append(
            f"| {r.suite} | {r.mode} ({r.tests or 'all'} tests{', fixed spin' if r.fixed else ''}) "
            f"| {r.unchanged_runs} | "
            f"{len(r.false_failures)}{_statuses(r.rc_unchanged)} | "
            f"{r.not_judged} | {c12[0]} / {c12[1]} / {c12[2]} | {c15[0]} / {c15[1]} / {c15[2]} | "
            f"{r.cost:.1f}x | {f'{copy[0]} / {copy[2]}' if copy else 'n/a'} |"
        )
    rows += [
        "",
        "| suite | target | plain pytest | slow-1.2 read by timeit: the function (the call) "
        "| slow-1.5 | injected leak in the terminal | unchanged code's leaks listed |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, f in factors.items():
        leak = leaks.get(name, {})
        shown = {k: f"{v[0]:.2f}x ({v[1]:.2f}x)" for k, v in f.items()}
        rows.append(
            f"| {name} | `{SUITES[name].target.function}` | {plain.get(name, 0):.1f} s | "
            f"{shown.get('slow-1.2', '')} | {shown.get('slow-1.5', '')} | "
            f"{'; '.join(leak.get('sections', [])) or 'no'} "
            f"({leak.get('line', '')}) | {len(leak.get('unchanged_flagged', []))} |"
        )
    for r in results:
        for kind, (iterations, factor) in r.fixed.items():
            rows.append(
                f"\n- {r.suite} {r.mode} {kind}: a fixed spin of {iterations} iterations per "
                f"call, {factor:.2f}x the function by timeit"
            )
        for failure in r.false_failures[:5]:
            rows.append(f"\n- {r.suite} {r.mode} false failure: {failure}")
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suites", default=",".join(SUITES))
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--unchanged", type=int, default=5, help="unchanged runs per mode")
    parser.add_argument(
        "--subset", type=int, default=24, help="tests per suite in the A/B and instruction modes"
    )
    parser.add_argument("--quick", action="store_true", help="two suites, two modes, two runs")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir(), "real-suites"))
    parser.add_argument("--json", type=Path, help="write every figure here")
    parser.add_argument("--markdown", type=Path, help="write the tables here")
    args = parser.parse_args(argv)
    names, modes = args.suites.split(","), args.modes.split(",")
    unchanged = args.unchanged
    if args.quick:
        names, modes, unchanged = list(QUICK["suites"]), list(QUICK["modes"]), QUICK["unchanged"]
    results, factors, leaks, plain = [], {}, {}, {}
    for name in names:
        gate = SUITES[name]
        directory = prepare(gate, args.cache, args.cache / "gates")
        restore(directory)
        base = pytest_run(directory, gate, ())
        plain[name] = base.wall_s
        suite_shares = shares(directory, gate)
        hot = {n for n, s in suite_shares.items() if s >= SHARE_FLOOR}
        factors[name] = {k: real_factor(directory, gate, k) for k in ("slow-1.2", "slow-1.5")}
        print(
            f"{name}: plain {base.wall_s:.1f} s rc={base.rc}, {len(hot)} tests >= 20% in "
            f"{gate.target.function}, timeit factors {factors[name]}",
            flush=True,
        )
        leaks[name] = leak_check(directory, gate)
        print(f"  leak: {leaks[name]}", flush=True)
        picked = subset(suite_shares, args.subset)
        small = pytest_run(directory, gate, (), picked)
        for mode in modes:
            costly = mode in COSTLY_MODES
            result = run_mode(
                directory,
                gate,
                mode,
                unchanged,
                hot,
                small.wall_s if costly else base.wall_s,
                picked if costly else None,
                {n for n, share in suite_shares.items() if share > 0},
            )
            print(f"  {mode}: {result}", flush=True)
            results.append(result)
    table = markdown(results, factors, leaks, plain)
    print(table)
    if args.markdown:
        args.markdown.write_text(table)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "results": [r.__dict__ for r in results],
                    "factors": factors,
                    "leaks": leaks,
                    "plain_s": plain,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
