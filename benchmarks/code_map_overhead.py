"""The code map's recording cost on top of `--profile` (issue 24): two suites, each run with
`pytest --profile --profile-gpu=no` with recording off and on, interleaved round by round (the
order alternates), each run in a fresh process, CPU time (user + system of the pytest process,
the re-executed one included: benchmarks/ms_suite.py says why not wall time), medians over the
rounds of the on/off ratio taken in the same round.

- ms suite: benchmarks/ms_suite.py's millisecond tests (JSON, sorting, dates, arithmetic).
- call-heavy: tests that make millions of small Python calls (a recursive fib, a
  recursive-descent parser), the worst case of a recorder that sees every call.

Recording on/off:
- default: the plugin's own recording, off with PYTEST_SCALENE_CODE_MAP=off, in a run that
  stores the map (`--profile-save-baseline`), with no map stored before it: every test is
  recorded (a project's first run, or a change every test runs through);
- --steady: the same with the map of an earlier run stored and the code unchanged: no test is
  recorded again, the cost left is reading the map and digesting its files;
- --raw: the bare recorder, `CodeSeen().start()`/`stop()` around each test's protocol by a
  conftest in the benchmark's directory, on when CODE_MAP_BENCH_RAW=on (both sides load it).
Also the in-process cost of start() + stop() for a test that ran 200 distinct code objects.
Target: <= 1.05x for both suites.

    python benchmarks/code_map_overhead.py --raw                # ~4 min per interpreter
    python benchmarks/code_map_overhead.py --raw --tests 300 --rounds 3 --out build/cm
Writes docs/benchmarks-code-map.json (the results of each Python version and mode are kept
side by side: run it once per interpreter) and docs/benchmarks-code-map.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ms_suite import SUITE as MS_SUITE  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TARGET_RATIO = 1.05
PROFILE = ["--profile", "--profile-gpu=no"]

CALL_HEAVY = """
import pytest


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


class Parser:
    def __init__(self, text):
        self.tokens = text.replace("(", " ( ").replace(")", " ) ").split()
        self.at = 0

    def peek(self):
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self):
        self.at += 1
        return self.tokens[self.at - 1]

    def expr(self):
        value = self.term()
        while self.peek() in ("+", "-"):
            value = value + self.term() if self.take() == "+" else value - self.term()
        return value

    def term(self):
        value = self.atom()
        while self.peek() == "*":
            self.take()
            value *= self.atom()
        return value

    def atom(self):
        if self.peek() == "(":
            self.take()
            value = self.expr()
            self.take()
            return value
        return int(self.take())


TEXT = " + ".join(f"({{i}} * 3 - (2 + {{i}}))" for i in range(400))


@pytest.mark.parametrize("i", range({n}))
def test_calls(i):
    if i % 2:
        assert fib(27) == 196418
    else:
        for _ in range(60):
            assert Parser(TEXT).expr() == sum(i * 3 - (2 + i) for i in range(400))
"""

RAW_CONFTEST = """
import os

import pytest

if os.environ.get("CODE_MAP_BENCH_RAW") == "on":
    from pytest_scalene.sampling.code_seen import CodeSeen

    _recorder = CodeSeen()
    if _recorder.problem:
        raise SystemExit(f"the recorder cannot run: {_recorder.problem}")
    _counts = []

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        _recorder.start()
        try:
            yield
        finally:
            _counts.append(len(_recorder.stop()))

    def pytest_sessionfinish(session):
        if os.environ.get("CODE_MAP_BENCH_COUNTS"):
            with open(os.environ["CODE_MAP_BENCH_COUNTS"], "w") as out:
                out.write(" ".join(map(str, _counts)))
"""

# Measured on 2026-11-25 (pyenv builds, no PGO; the shared 2-core VM), kept with the table.
FINDINGS = """\
Rows marked "earlier": the first measurement, with the Python callback on 3.12 (3.11: the same
hook as now). The others: the callback in C (below), the plugin's own recording off on both
sides (since its integration it recorded on both, which hid the recorder's cost).
On 3.12 the builtin brings the ms suite from 1.163x (the Python callback, same conditions:
529 µs a test) to 1.077x and 1.105x in two runs (261 and 324 µs a test): still above the
target; the call-heavy suite stays under it. 3.11 is unchanged (0.992x, 1.151x).
The two means of recording cost in opposite places:
- 3.12+ (sys.monitoring): per distinct code object per test, whether the test calls it once
  or a million times. A millisecond test runs ~390 code objects, mostly pytest's own (setup,
  call, teardown, reports). The split, in-process (400 functions of 30 lines, each run once
  a test, best of 7 x 200 tests): the re-instrumentation that `restart_events()` causes on each
  code object's next run, with the event's dispatch, 1.9-2.0 µs per code object; the callback
  on top: 0.0-0.04 µs as the extension's builtin, 1.9-2.3 µs as a Python function. So the
  builtin halves the cost and what remains is restart_events'. The ms suite in-process without
  --profile (300 tests, 7 interleaved rounds, medians): 1332 µs a test unrecorded, 1492 with
  the builtin (283 code objects: +0.57 µs each), 1779 with the Python callback. Turning the
  events off at each stop() (as first written) doubled the re-instrumentation.
- 3.10/3.11 (PEP 523 hook): per Python call. On 3.11 any frame-evaluation function turns off
  the inlined Python-to-Python calls, so every call costs a C-level call: in-process, a
  recursive fib runs 1.30-1.49x slower and the parser 1.27-1.33x while recording, a generator
  loop 1.01-1.04x (3.10, which never inlined: 1.01-1.06x). The ms suite pays little; the
  call-heavy suite misses the target.
- The alternative measured: the same hook on 3.12 (a scratch build, not kept), 7 rounds: ms
  suite 1.098x (307 µs a test: pytest's own calls lose their inlining), call-heavy 1.221x:
  worse than sys.monitoring on both. Neither means meets both targets on one interpreter.
- Noise: load averages of 2-11 on the 2 cores (three engineers). The 3.11 ms suite's earlier
  runs of 7 rounds gave 1.009x, 1.055x and 0.997x; per-round ratios spread by +-0.05 to 0.15.
- What would: recording in fewer runs rather than cheaper: only the tests whose stored map is
  missing or stale (the integration does this), so a run pays the ratio above on that share of
  its tests and nothing on the rest.
- Or, on 3.12+, no restart_events but a second tool id whose local events are re-armed
  (set_local_events off, then on) at each start on the code objects that fired in the last
  test; the rest fires once per process on the global events. Prototypes (in-process, without
  --profile, 300 tests, 7 interleaved rounds, medians; not kept), the ms suite and a suite of
  jsonschema.validate calls (an installed distribution), µs a test:
  unrecorded 1332 / 1866; restart_events 1492 / 2095; re-arming the project's code only
  1325 / 1886; re-arming all but the stdlib and the runner (pytest, pluggy, this plugin:
  their code runs in every test's protocol) 1319 / 2021 (65 code objects a test re-armed).
  Re-arming one code object this way costs 3.9 µs against 1.9 with restart_events (eager, and
  twice), so tests that run mostly third-party code would pay up to twice today's cost. What
  each loses: project-only loses which installed distributions a test ran (their code is seen
  only the first time it runs in the process); all-but-stdlib-and-runner loses the stdlib per
  test (nothing: the map covers it by the interpreter's version) and the runner's code per test
  (its distributions would have to go into every test's map, as they run in every test), and
  needs a scope passed to the recorder from selection/places.py. First not merged (not better
  on every suite, and an API change for the code map to decide); then merged as project-only,
  with what it lost made safe: a test's map lists every distribution run so far in the
  session (a version change re-measures more tests, never fewer). Code that first runs
  between recordings (collection, tests not recorded) is kept by the extension and handed to
  the recorder after each test, so the project's is followed from then on. The rows
  "first record" on 3.12 and 3.13 measure this (3.10/3.11 keep the frame-evaluation hook):
  1.034x and 1.027x on the ms suite, 1.028x and 1.012x call-heavy, with the plugin's own
  work per test cut too (one index look-up per code object, installed distributions read
  once as text: 0.1 s a session less), which brought 3.11's ms suite from 1.150x to 1.029x.
  3.11's call-heavy suite stays at 1.14x: the hook's price, paid only by tests recorded."""

SUITES = {"ms_suite": (MS_SUITE, 1000), "call_heavy": (CALL_HEAVY, 30)}


def cpu_s(directory: Path, env: dict[str, str], args: tuple[str, ...] = ()) -> float:
    """CPU time (user + system) of one profiled pytest run, the re-executed process included."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *PROFILE, *args]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command, cwd=directory, capture_output=True, text=True, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"the run failed:\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def environments(raw: bool, counts: Path) -> dict[str, dict[str, str]]:
    base = {k: v for k, v in os.environ.items() if k != "PYTEST_SCALENE_CODE_MAP"}
    base.pop("CODE_MAP_BENCH_RAW", None)
    if raw:  # the plugin's own recording off on both sides: only the bare recorder differs
        quiet = {**base, "PYTEST_SCALENE_CODE_MAP": "off"}
        return {
            "off": quiet,
            "on": {**quiet, "CODE_MAP_BENCH_RAW": "on", "CODE_MAP_BENCH_COUNTS": str(counts)},
        }
    return {"off": {**base, "PYTEST_SCALENE_CODE_MAP": "off"}, "on": base}


def measure_suite(source: str, tests: int, rounds: int, raw: bool, steady: bool = False) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        (directory / "test_suite.py").write_text(source.format(n=tests))
        (directory / "conftest.py").write_text(RAW_CONFTEST)
        counts = directory / "counts.txt"
        envs = environments(raw, counts)
        args = () if raw else ("--profile-save-baseline",)  # a run that stores the map
        code_map = directory / "baselines" / "code-map.json"
        if steady:
            cpu_s(directory, envs["on"], args)  # the map of an earlier run, code unchanged
        runs: dict[str, list[float]] = {"off": [], "on": []}
        for r in range(rounds):
            for mode in ("off", "on") if r % 2 == 0 else ("on", "off"):
                if not steady:
                    code_map.unlink(missing_ok=True)  # every test recorded
                runs[mode].append(cpu_s(directory, envs[mode], args))
            print(f"  round {r + 1}: off {runs['off'][-1]:.2f} s, on {runs['on'][-1]:.2f} s")
        seen = [int(c) for c in counts.read_text().split()] if counts.exists() else []
    ratios = [on / off for on, off in zip(runs["on"], runs["off"], strict=True)]
    extra = [(on - off) * 1e6 / tests for on, off in zip(runs["on"], runs["off"], strict=True)]
    return {
        "tests": tests,
        "cpu_s": runs,
        "ratio": statistics.median(ratios),
        "ratios": ratios,
        "us_per_test": statistics.median(extra),
        "code_objects_per_test": statistics.median(seen) if seen else None,
    }


def start_stop_us() -> float | None:
    """µs of start() + stop() around a 'test' that ran 200 distinct code objects, less the same
    calls unrecorded: the recorder's fixed cost per test."""
    from pytest_scalene.sampling.code_seen import CodeSeen

    recorder = CodeSeen()
    if recorder.problem:
        return None
    functions = []
    for i in range(200):
        namespace: dict = {}
        exec(f"def f{i}():\n    return {i}", namespace)
        functions.append(namespace[f"f{i}"])

    def run_all() -> None:
        for function in functions:
            function()

    def recorded() -> None:
        recorder.start()
        run_all()
        assert len(recorder.stop()) >= 200

    best_recorded = min(timeit.repeat(recorded, number=200, repeat=5)) / 200
    best_plain = min(timeit.repeat(run_all, number=200, repeat=5)) / 200
    return (best_recorded - best_plain) * 1e6


def measure(args: argparse.Namespace) -> dict:
    suites = {}
    for name, (source, default_tests) in SUITES.items():
        tests = args.tests if name == "ms_suite" and args.tests else default_tests
        print(f"{name}: {tests} tests, {args.rounds} rounds")
        suites[name] = measure_suite(source, tests, args.rounds, args.raw, args.steady)
    return {
        "mode": "raw" if args.raw else "steady" if args.steady else "first record",
        "python": sys.version.split()[0],
        "rounds": args.rounds,
        "suites": suites,
        "start_stop_us_200_codes": start_stop_us(),
        "loadavg": os.getloadavg(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def render(all_results: dict[str, dict]) -> str:
    rows = []
    for _, r in sorted(all_results.items()):
        for name, s in r["suites"].items():
            verdict = "pass" if s["ratio"] <= TARGET_RATIO else "**MISSED**"
            seen = s["code_objects_per_test"]
            rows.append(
                f"| {r['python']} | {r['mode']} | {name} ({s['tests']} tests) | "
                f"{s['ratio']:.3f}x | {s['us_per_test']:.0f} µs | "
                f"{'-' if seen is None else f'{seen:.0f}'} | {verdict} |"
            )
    micro = [
        f"- Python {r['python']} ({r['mode']}): {r['start_stop_us_200_codes']:.0f} µs"
        for _, r in sorted(all_results.items())
        if r.get("start_stop_us_200_codes") is not None
    ]
    return "\n".join(
        [
            "# Benchmarks: the code map's recording cost",
            "",
            "Generated by `python benchmarks/code_map_overhead.py` (its docstring gives the "
            "method); raw numbers in [benchmarks-code-map.json](benchmarks-code-map.json). "
            "Each suite runs under `pytest --profile --profile-gpu=no` with the recording of "
            "which code each test ran (`sampling/code_seen.py`) off and on, in fresh processes, "
            "interleaved; the ratio is on/off CPU time in the same round, median over the "
            "rounds, so it includes pytest's and the profiler's own cost in the denominator. "
            "`raw`: the bare recorder around each test by a conftest; `first record`: the "
            "plugin's recording in a `--profile-save-baseline` run with no map stored (every "
            "test recorded), off with `PYTEST_SCALENE_CODE_MAP=off`; `steady`: the same with "
            "the map of an earlier run stored and the code unchanged (no test recorded again: "
            "what most runs pay). A plain `--profile` run stores no map and records nothing.",
            "",
            f"Target: <= {TARGET_RATIO:.2f}x on both suites.",
            "",
            "| Python | mode | suite | CPU on vs off | extra per test | code objects per "
            "test | verdict |",
            "|---|---|---|---|---|---|---|",
            *rows,
            "",
            "start() + stop() around a test that ran 200 distinct code objects, less the same "
            "calls unrecorded (in-process, best of 5):",
            "",
            *micro,
            "",
            "## Where the cost comes from",
            "",
            FINDINGS,
            "",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--raw", action="store_true", help="the bare recorder, by a conftest")
    parser.add_argument("--steady", action="store_true", help="a map stored, code unchanged")
    parser.add_argument("--tests", type=int, default=0, help="ms suite's tests (1000)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "docs")
    args = parser.parse_args()
    results = measure(args)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "benchmarks-code-map.json"
    all_results = json.loads(path.read_text()) if path.exists() else {}
    all_results[f"{results['python'].rsplit('.', 1)[0]} {results['mode']}"] = results
    path.write_text(json.dumps(all_results, indent=1) + "\n")
    (args.out / "benchmarks-code-map.md").write_text(render(all_results))
    print(render(all_results))


if __name__ == "__main__":
    main()
