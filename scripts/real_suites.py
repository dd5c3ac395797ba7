"""Run well-known packages' own test suites with and without pytest-scalene, and compare.

Each suite (its pinned sdist, downloaded with pip and unpacked outside the repo) runs in three
modes, interleaved: without the plugin's options, with `--profile` (memory profiling on: pytest is
re-executed with the allocator shim preloaded) and with `--profile --profile-memory=no`. The
plugin must not change any test's outcome, crash or hang, and every profiled run must write a
valid JSON profile. The wall-clock overhead of each mode is the median over the repetitions
divided by the plain median. docs/reliability.md holds the results and the command line.

    .venv/bin/python scripts/real_suites.py --reps 3 --markdown /tmp/real_suites.md

Exit status: 0 when every suite behaved the same in every mode, 1 otherwise (the differences are
printed), 2 when a sdist could not be downloaded.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

# An editable install of pytest-scalene (scikit-build-core) puts an import-hook module among the
# plugin's files; pytest warns that it cannot rewrite it, and a suite with filterwarnings=error
# (toolz) would fail at startup. A regular install has no such module; ignoring the warning keeps
# both kinds of install comparable. It applies to every mode alike.
EDITABLE_WARNING = (
    "ignore:Module already imported so cannot be rewritten:pytest.PytestAssertRewriteWarning"
)
MODES = {
    "plain": (),
    "profile": ("--profile",),
    "profile-memory-no": ("--profile", "--profile-memory=no"),
}
OUTCOMES_PLUGIN = "_real_suite_outcomes"
# Writes every test's outcome (by node id) to $REAL_SUITE_OUTCOMES at the end of the session.
OUTCOMES_SOURCE = """
import json, os

_outcomes = {}

def pytest_runtest_logreport(report):
    if "subtest" in type(report).__name__.lower():
        return  # a subtest's report: the test's own reports decide its outcome
    if report.when != "call" and report.passed:
        return
    if hasattr(report, "wasxfail"):
        outcome = "xfailed" if report.skipped else "xpassed"
    elif report.when != "call" and report.failed:
        outcome = "error"
    else:
        outcome = report.outcome
    if _outcomes.get(report.nodeid) not in ("failed", "error"):
        _outcomes[report.nodeid] = outcome

def pytest_sessionfinish(session):
    with open(os.environ["REAL_SUITE_OUTCOMES"], "w") as f:
        json.dump(_outcomes, f)
"""


@dataclass(frozen=True)
class Suite:
    name: str  # the distribution's name on PyPI
    version: str
    kind: str  # what it exercises
    pythonpath: str = "."  # relative to the unpacked sdist: where its package imports from
    args: tuple[str, ...] = ()  # test paths and options, as its own CI passes them


SUITES = {
    s.name: s
    for s in (
        Suite("more-itertools", "11.2.1", "pure Python, ~10k unittest subtests"),
        Suite("toolz", "1.2.0", "pure Python, filterwarnings=error"),
        Suite("attrs", "26.1.0", "pure Python, hypothesis", pythonpath="src"),
        Suite("uncertainties", "3.2.3", "numpy"),
        Suite("numpy-financial", "1.0.0", "numpy, decimal"),
    )
}
CI_SUITES = ("toolz", "numpy-financial")  # a few seconds each: tests/test_real_suites.py


class FetchError(Exception):
    pass


@dataclass
class Run:
    mode: str
    rc: int | None  # None: killed at the timeout (a hang)
    wall_s: float
    cpu_s: float  # user + system CPU of the pytest process: less sensitive to a busy machine
    counts: dict[str, int]
    outcomes: dict[str, str]
    problems: list[str] = field(default_factory=list)  # crash, missing or invalid JSON
    memory: bool = False  # the profile JSON has memory figures (the shim was preloaded)


def fetch(suite: Suite, cache: Path, work: Path, timeout_s: float = 300.0) -> Path:
    """Download the sdist into `cache` (once) and unpack it under `work`; returns its directory."""
    cache.mkdir(parents=True, exist_ok=True)
    stem = suite.name.replace("-", "_")
    found = [p for p in cache.glob("*.tar.gz") if _sdist_matches(p.name, suite)]
    if not found:
        command = [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps"]
        command += ["--quiet", "--retries", "1", "--timeout", str(min(timeout_s, 60.0))]
        command += ["-d", str(cache), f"{suite.name}=={suite.version}"]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise FetchError(f"pip download {suite.name}=={suite.version} timed out") from None
        found = [p for p in cache.glob("*.tar.gz") if _sdist_matches(p.name, suite)]
        if done.returncode or not found:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no sdist"]
            raise FetchError(f"pip download {suite.name}=={suite.version} failed: {tail[0]}")
    target = work / f"{stem}-{suite.version}"
    if not target.is_dir():
        with tarfile.open(found[0]) as tar:
            tar.extractall(work, filter="data")
        unpacked = [p for p in work.iterdir() if p.is_dir() and _sdist_matches(p.name, suite)]
        if not unpacked:
            raise FetchError(f"{found[0].name} did not unpack to a {suite.name} directory")
        if unpacked[0] != target:
            unpacked[0].rename(target)
    return target


def _sdist_matches(name: str, suite: Suite) -> bool:
    normal = re.sub(r"[-_.]+", "_", name.lower())
    return normal.startswith(re.sub(r"[-_.]+", "_", f"{suite.name}-{suite.version}".lower()))


def parse_counts(output: str) -> dict[str, int]:
    """pytest's last summary line, e.g. '746 passed, 1 skipped, 3 warnings in 8.4s'."""
    for line in reversed(output.strip().splitlines()):
        line = line.strip("= ")
        if re.search(r" in [\d.]+s\b", line):
            counts = {}
            for number, what in re.findall(r"(\d+) ([a-z ]+?)(?=,| in )", line):
                what = "errors" if what == "error" else what
                if not what.startswith("warning"):
                    counts[what] = int(number)
            return counts
    return {}


def run_suite(
    directory: Path,
    suite: Suite,
    mode: str,
    timeout_s: float,
    python: str = sys.executable,
    extra: tuple[str, ...] = (),
) -> Run:
    """One pytest run of the suite in `mode`; its outcomes, counts and wall time."""
    with tempfile.TemporaryDirectory(prefix="real-suite-") as scratch:
        Path(scratch, OUTCOMES_PLUGIN + ".py").write_text(OUTCOMES_SOURCE)
        outcomes_file = Path(scratch, "outcomes.json")
        json_file = Path(scratch, "profile.json")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHON"))}
        env["PYTHONPATH"] = os.pathsep.join([str(directory / suite.pythonpath), scratch])
        env["REAL_SUITE_OUTCOMES"] = str(outcomes_file)
        command = [python, "-m", "pytest", "-p", "no:cacheprovider", "-p", OUTCOMES_PLUGIN]
        command += ["-W", EDITABLE_WARNING, *MODES[mode], *extra, *suite.args]
        if mode != "plain":
            command.append(f"--profile-json={json_file}")
        start, cpu_start = time.perf_counter(), _children_cpu()
        try:
            done = subprocess.run(
                command, cwd=directory, env=env, capture_output=True, text=True, timeout=timeout_s
            )
            rc: int | None = done.returncode
            output = done.stdout + done.stderr
        except subprocess.TimeoutExpired as exc:
            rc, output = None, _text(exc.stdout) + _text(exc.stderr)
        wall_s, cpu_s = time.perf_counter() - start, _children_cpu() - cpu_start
        run = Run(mode, rc, wall_s, cpu_s, parse_counts(output), {})
        if outcomes_file.exists():
            run.outcomes = json.loads(outcomes_file.read_text())
        if rc is None:
            run.problems.append(f"hang: killed after {timeout_s:.0f} s")
        elif rc not in (0, 1):
            tail = "\n    ".join(output.strip().splitlines()[-15:])
            run.problems.append(f"exit status {rc} (crash or internal error):\n    {tail}")
        if mode != "plain" and rc is not None:
            run.problems += _check_json(json_file, run.outcomes)
            run.memory = _has_memory(json_file)
        return run


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # children that have ended
    return usage.ru_utime + usage.ru_stime


def _text(data: str | bytes | None) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")


def _check_json(path: Path, outcomes: dict[str, str]) -> list[str]:
    """The profile JSON exists, parses, and holds every test whose call phase ran."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return [f"profile JSON {path.name} missing or invalid: {exc}"]
    ran = {n for n, o in outcomes.items() if o in ("passed", "failed", "xfailed", "xpassed")}
    missing = sorted(ran - set(data.get("tests", {})))
    if data.get("schema") != 1 or missing:
        return [f"profile JSON lacks {len(missing)} tests that ran, e.g. {missing[:3]}"]
    return []


def _has_memory(path: Path) -> bool:
    try:
        tests = json.loads(path.read_text()).get("tests", {})
    except (OSError, ValueError):
        return False
    return any("peak_mb" in test for test in tests.values())


def differences(runs: list[Run]) -> list[str]:
    """Every way in which a run differs from the first plain run."""
    reference = runs[0]
    found = []
    for run in runs[1:]:
        if run.counts != reference.counts:
            found.append(f"{run.mode}: counts {run.counts} != plain {reference.counts}")
        changed = {
            n: (o, run.outcomes.get(n, "absent"))
            for n, o in reference.outcomes.items()
            if run.outcomes.get(n, "absent") != o
        }
        changed.update(
            (n, ("absent", o)) for n, o in run.outcomes.items() if n not in reference.outcomes
        )
        for nodeid, (before, after) in sorted(changed.items())[:10]:
            found.append(f"{run.mode}: {nodeid}: plain {before}, here {after}")
    return found


@dataclass
class SuiteResult:
    suite: Suite
    runs: list[Run]
    memory: bool
    problems: list[str]

    def median(self, mode: str, what: str = "wall_s") -> float:
        return statistics.median(getattr(r, what) for r in self.runs if r.mode == mode)

    def ratio(self, mode: str, what: str = "wall_s") -> float:
        return self.median(mode, what) / self.median("plain", what)


def measure(suite: Suite, directory: Path, reps: int, extra: tuple[str, ...] = ()) -> SuiteResult:
    # A first, uncounted run compiles the suite's bytecode and sets the hang timeout.
    warm = run_suite(directory, suite, "plain", timeout_s=1800, extra=extra)
    timeout_s = max(120.0, 10 * warm.wall_s)
    runs = [warm] + [
        run_suite(directory, suite, mode, timeout_s, extra=extra)
        for _ in range(reps)
        for mode in MODES
    ]
    problems = [p for r in runs for p in r.problems] + differences(runs)
    memory = all(r.memory for r in runs if r.mode == "profile")
    return SuiteResult(suite, runs[1:], memory, problems)


def markdown(results: list[SuiteResult], reps: int) -> str:
    rows = [
        "| suite | kind | outcomes (identical in all modes?) | plain: wall, CPU | "
        "--profile: wall, CPU | --profile --profile-memory=no: wall, CPU |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        counts = ", ".join(f"{n} {what}" for what, n in r.runs[0].counts.items())
        same = "yes" if not r.problems else "**no**"
        memory = "" if r.memory else " (memory not measured)"
        cells = [f"{r.median('plain'):.1f} s, {r.median('plain', 'cpu_s'):.1f} s"]
        for mode in ("profile", "profile-memory-no"):
            cells.append(
                f"{r.median(mode):.1f} s (x{r.ratio(mode):.2f}), "
                f"{r.median(mode, 'cpu_s'):.1f} s (x{r.ratio(mode, 'cpu_s'):.2f})"
            )
        rows.append(
            f"| {r.suite.name} {r.suite.version} | {r.suite.kind} | {counts} ({same}) | "
            f"{cells[0]} | {cells[1]}{memory} | {cells[2]} |"
        )
    rows.append(
        f"\nWall time and CPU time (user + system) of the whole pytest process, median of {reps} "
        "interleaved runs per mode; the ratio is to the plain median."
    )
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suites", default=",".join(SUITES), help="comma-separated names")
    parser.add_argument("--reps", type=int, default=3, help="runs per mode (default 3)")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir(), "real-suites"))
    parser.add_argument("--markdown", type=Path, help="also write the table to this file")
    parser.add_argument(
        "--pytest-arg",
        action="append",
        default=[],
        help="an extra pytest argument for every run (repeatable), e.g. "
        "--pytest-arg=-ofaulthandler_timeout=60 to see where a hanging run waits",
    )
    args = parser.parse_args(argv)
    results = []
    for name in args.suites.split(","):
        suite = SUITES[name]
        try:
            directory = fetch(suite, args.cache / "sdists", args.cache / "src")
        except FetchError as exc:
            print(exc, file=sys.stderr)
            return 2
        print(f"{suite.name} {suite.version}: {directory}", flush=True)
        result = measure(suite, directory, args.reps, tuple(args.pytest_arg))
        for run in result.runs:
            print(
                f"  {run.mode:18} rc={run.rc} {run.wall_s:7.2f} s wall {run.cpu_s:7.2f} s CPU "
                f"{run.counts}",
                flush=True,
            )
        for problem in result.problems:
            print(f"  PROBLEM {problem}", flush=True)
        results.append(result)
    table = markdown(results, args.reps)
    print(table)
    if args.markdown:
        args.markdown.write_text(table)
    return 1 if any(r.problems for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
