"""Test selection by the code map on a real suite (issue 24): does a pull-request gate cost what
the change touches? pyparsing's own suite (2,073 tests, pinned sdist) in a git repository; a
baseline commit stores the code map and the instruction counts; then each case is committed on
top of it and timed, interleaved: plain `pytest` of the whole suite, the A/B gate
(`--profile-compare-ref=<baseline commit>`) and the instruction gate (`--profile-measure=
instructions --profile-compare`). docs/benchmarks-selection.md holds the results.

Cases:
- slow-1.2: `PrecededBy.parseImpl` (run by 6 of the 2,073 tests, each spending >= 50% of its CPU
  time in it) made 1.2x slower by an empty loop of a fixed count at the end of each outermost
  call, calibrated on those tests (inject_slowdown says why not real_suites_gates.inject);
- docs: a paragraph added to a docs file;
- dead-function: a statement added to `MatchFirst.__ior__`, which no test runs (checked).
A test counts as caught when a verdict fails it, as named when a failing verdict's message
holds the function's qualified name; in the unrelated cases any failed verdict is a false one.

    python benchmarks/selection_real_suite.py --unrelated-runs 5 --slow-runs 3

Run it with the Python of a virtual environment that has pytest-scalene and the suite's test
dependencies (benchmarks/requirements-selection.txt).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # its sibling, run as a script
import real_suites_gates as gates  # noqa: E402

SUITE = gates.GateSuite(
    gates.real_suites.Suite("pyparsing", "3.3.3", "pure-Python parser", args=("tests",)),
    gates.Target(
        "pyparsing/core.py",
        "PrecededBy.parseImpl",
        "pyparsing.core",
        "",  # no timeit: the slowdown is read in the tests themselves (slowdown_factor)
        "",
    ),
)
DEAD = ("pyparsing/core.py", "MatchFirst.__ior__")  # no test runs it: check_dead says so
DOCS_FILE = "docs/HowToUsePyparsing.rst"
SLOWDOWN = 1.2  # the slow case's factor on the function, calibrated (calibrate)
CASES = (f"slow-{SLOWDOWN}", "docs", "dead-function")
GATES = ("ab", "instructions")
MAP = Path("baselines") / "code-map.json"
HELPER = "_pss_slowdown"  # the spin's state and calibration, beside the package
MARK = gates.MARK
OUT = Path(__file__).resolve().parents[1] / "docs" / "benchmarks-selection"


def _git(directory: Path, *args: str) -> str:
    return gates._git(directory, "-c", "user.email=b@x", "-c", "user.name=bench", *args).strip()


def _edit_function(directory: Path, file: str, qualname: str, statement: str) -> int:
    """Insert one statement at the top of the function's body; returns its 1-based line."""
    path = directory / file
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    start = gates._body_start(gates._function_node(ast.parse("".join(lines)), qualname))
    indent = lines[start][: len(lines[start]) - len(lines[start].lstrip())]
    lines.insert(start, f"{indent}{statement}  {MARK}\n")
    path.write_text("".join(lines), encoding="utf-8")
    return start + 1


def inject_slowdown(directory: Path, gate: Any, iterations: int) -> int:
    """At the end of each outermost call of the target, an empty loop of `iterations` in the
    function itself (so that it is the culprit). A fixed count, not real_suites_gates.inject's
    spin on the thread's CPU clock: that one's two clock reads cost more than 20% of a call of a
    few microseconds, and a time-based spin executes a different number of instructions in
    each session (the instruction gate's re-count then calls the test not judged). The loop's
    state lives in the module HELPER, imported inside the function: the module's top level is
    left as it was, so only the function changed. Returns the loop's line."""
    root = directory / gate.suite.pythonpath
    helper = f"# {MARK}\n_pss_depth = [0]\n_pss_iterations = {iterations}\n"
    (root / f"{HELPER}.py").write_text(helper, encoding="utf-8")
    path = directory / gate.target.file
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    node = gates._function_node(ast.parse("".join(lines)), gate.target.function)
    start, end = gates._body_start(node), node.end_lineno or node.lineno
    indent = lines[start][: len(lines[start]) - len(lines[start].lstrip())]
    body = ["    " + line if line.strip() else line for line in lines[start:end]]
    spin = [f"import {HELPER} as _pss  {MARK}\n", "_pss._pss_depth[0] += 1\n", "try:\n"]
    after = [
        "finally:\n",
        "    _pss._pss_depth[0] -= 1\n",
        "    if not _pss._pss_depth[0]:\n",
        "        for _pss_i in range(_pss._pss_iterations):\n",
        "            pass\n",
    ]
    lines[start:end] = [indent + x for x in spin] + body + [indent + x for x in after]
    path.write_text("".join(lines), encoding="utf-8")
    return start + len(spin) + len(body) + len(after) - 1


def factor_from_shares(before: float, after: float) -> float:
    """The function's own slowdown from its share of a test's CPU time before and after (the
    rest of the test unchanged): the ratio of the odds s / (1 - s)."""
    before, after = min(before, 0.999), min(after, 0.999)
    return (after / (1 - after)) / (before / (1 - before))


def slowdown_factor(
    directory: Path, gate: Any, hot: list[str], iterations: int, rounds: int = 3
) -> float:
    """The injected loop's real factor on the function in the tests that spend the most in it:
    the median over tests and rounds (each round unchanged, then slowed)."""
    ratios = []
    for _ in range(rounds):
        before = gates.shares(directory, gate, hot)
        inject_slowdown(directory, gate, iterations)
        try:
            after = gates.shares(directory, gate, hot)
        finally:
            gates.restore(directory)
            (directory / gate.suite.pythonpath / f"{HELPER}.py").unlink()
        ratios += [
            factor_from_shares(before[n], after[n]) for n in hot if before.get(n) and n in after
        ]
    if not ratios:
        raise RuntimeError(f"no share of {gate.target.function} measured in {len(hot)} tests")
    return statistics.median(ratios)


def calibrate(measure: Any, target: float, start: int = 1000, tries: int = 4) -> tuple[int, float]:
    """The loop's iterations for a `target` factor, `measure(iterations)` reading the factor:
    scaled from a first reading that shows a slowdown, then one secant step from the two
    readings (the call's own cost of the edit, the import and the try, is not zero)."""
    iterations = start
    for _ in range(tries):
        factor = measure(iterations)
        if factor > 1.02:
            scaled = max(1, round(iterations * (target - 1) / (factor - 1)))
            second = measure(scaled)
            if abs(second - factor) < 1e-3 or scaled == iterations:
                return scaled, second
            slope = (factor - second) / (iterations - scaled)
            final = max(1, round(scaled + (target - second) / slope))
            return final, measure(final)
        iterations *= 10
    raise RuntimeError(f"{iterations // 10} iterations read {factor:.3f}x: no slowdown to scale")


def apply_case(directory: Path, gate: Any, case: str, iterations: int = 0) -> str:
    """Edit the tree for `case`; returns what changed, for the commit message."""
    if case.startswith("slow-"):
        line = inject_slowdown(directory, gate, iterations)
        return (
            f"{gate.target.function} {case}: {iterations} iterations at {gate.target.file}:{line}"
        )
    if case == "docs":
        with (directory / DOCS_FILE).open("a", encoding="utf-8") as f:
            f.write("\n\nA paragraph added by the selection benchmark.\n")
        return f"a paragraph added to {DOCS_FILE}"
    if case == "dead-function":
        line = _edit_function(directory, *DEAD, "_pss_unused = None")
        return f"a statement added to {DEAD[1]} ({DEAD[0]}:{line})"
    raise ValueError(f"unknown case {case!r}: one of {', '.join(CASES)}")


def check_dead(directory: Path, gate: Any) -> int:
    """How many times the whole suite calls DEAD (0 for a function no test runs)."""
    with tempfile.TemporaryDirectory() as scratch:
        mark = Path(scratch, "calls")
        probe = f'open({str(mark)!r}, "a").write(".")'
        _edit_function(directory, *DEAD, probe)
        try:
            gates.pytest_run(directory, gate, ())
        finally:
            gates.restore(directory)
        return len(mark.read_text()) if mark.exists() else 0


# -- reading a gated run -------------------------------------------------------------------------
def selection_of(report: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON report's "selection" (measured: {nodeid: reason}, unchanged: [nodeid], note),
    None when the report has none (a pytest-scalene without selection)."""
    found = report.get("selection")
    if not isinstance(found, dict):
        return None
    return {
        "measured": dict(found.get("measured") or {}),
        "unchanged": list(found.get("unchanged") or []),
        "note": found.get("note"),
    }


def judge(tests: dict[str, Any], hot: set[str], qualname: str) -> dict[str, list[str]]:
    """The tests a failed verdict fails; of `hot` (>= 20% in the function), those caught and
    those whose failing verdict names `qualname`."""
    failing: dict[str, list[str]] = {}
    for nodeid, test in tests.items():
        messages = [v.get("message") or "" for v in test.get("verdicts", []) if not v["passed"]]
        if messages:
            failing[nodeid] = messages
    caught = sorted(n for n in hot if n in failing)
    named = [n for n in caught if any(qualname in m for m in failing[n])]
    return {
        "failures": sorted(failing),
        "caught": caught,
        "named": named,
        "messages": {n: failing[n][0][:300] for n in sorted(failing)[:10]},
    }


def outcomes_as_plain(gated: dict[str, Any], plain: dict[str, Any]) -> bool:
    """Whether the gated run's tests ended as in the plain run, but for the failures its
    verdicts made (those tests pass in the plain run)."""
    counts = dict(gated["counts"])
    failed_by_verdicts = len(gated.get("failures", []))
    counts["failed"] = counts.get("failed", 0) - failed_by_verdicts
    counts["passed"] = counts.get("passed", 0) + failed_by_verdicts
    return {k: n for k, n in counts.items() if n} == plain["counts"]


def gated_run(directory: Path, gate: Any, args: tuple[str, ...], timeout_s: float) -> Any:
    """One run of the whole suite with `args`; the Run, with the full JSON report in `.report`."""
    with tempfile.TemporaryDirectory(prefix="pss-selection-") as scratch:
        path = Path(scratch, "report.json")
        # After pytest_run's own --profile-json: the last one is pytest's.
        run = gates.pytest_run(
            directory, gate, (*args, f"--profile-json={path}"), timeout_s=timeout_s
        )
        run.report = json.loads(path.read_text()) if path.exists() else {}
    run.tests = run.report.get("tests", {})
    return run


def summarize(run: Any, hot: set[str], called: set[str], qualname: str) -> dict[str, Any]:
    """What the table needs from one run (plain runs have no report)."""
    row: dict[str, Any] = {"wall_s": run.wall_s, "cpu_s": run.cpu_s, "rc": run.rc}
    row["load_1m"] = os.getloadavg()[0]  # the machine's other work, at the run's end
    row["counts"] = gates.real_suites.parse_counts(run.output)
    report = getattr(run, "report", None)
    if report is None:
        return row
    selection = selection_of(report)
    if selection is not None:
        row["measured_calling"] = sorted(set(selection["measured"]) & called)
        # Thousands of unchanged node ids a run: their count is what the page shows.
        selection = {**selection, "unchanged": len(selection["unchanged"])}
    row["selection"] = selection
    row.update(judge(run.tests, hot, qualname))
    row["not_judged"] = gates.not_judged(run)
    if run.rc not in (0, 1):
        row["output_tail"] = run.output.strip().splitlines()[-15:]
    return row


# -- the benchmark -------------------------------------------------------------------------------
def save_baseline(directory: Path, gate: Any, instruction_tests: list[str] | None) -> str:
    """The baseline commit: the sdist with baselines/ (the code map, the counts) committed.
    `instruction_tests`: the tests whose counts are saved (None: the whole suite, which costs
    40-120x its plain run under callgrind); the map then comes from a `--profile` save of the
    whole suite, made first (a later save of a test rewrites its entry, its counts included)."""
    _git(directory, "checkout", "-q", "-f", "-B", "selection-bench", _sdist_commit(directory))
    _git(directory, "clean", "-fdq")
    shutil.rmtree(directory / "baselines", ignore_errors=True)
    saves = []
    if instruction_tests is not None:
        saves.append((("--profile", "--profile-save-baseline"), None))
    saves.append((("--profile-measure=instructions", "--profile-save-baseline"), instruction_tests))
    for args, nodeids in saves:
        run = gates.pytest_run(directory, gate, args, nodeids)
        if run.rc not in (0, 1):
            raise RuntimeError(f"{' '.join(args)}: exit status {run.rc}:\n{run.output[-3000:]}")
    if not (directory / MAP).is_file():
        raise RuntimeError(
            f"no {MAP} after --profile-save-baseline: this pytest-scalene has no test selection"
        )
    _git(directory, "add", "-f", "baselines")
    _git(directory, "commit", "-qm", "baseline: code map and instruction counts")
    return _git(directory, "rev-parse", "HEAD")


def _sdist_commit(directory: Path) -> str:
    return _git(directory, "rev-list", "--max-parents=0", "HEAD").splitlines()[0]


def gate_args(gate_name: str, ref: str) -> tuple[str, ...]:
    if gate_name == "ab":
        return (f"--profile-compare-ref={ref}",)
    if gate_name == "instructions":
        return ("--profile-measure=instructions", "--profile-compare")
    raise ValueError(f"unknown gate {gate_name!r}: one of {', '.join(GATES)}")


def run_case(
    directory: Path, gate: Any, case: str, ref: str, runs: int, facts: dict[str, Any]
) -> dict[str, list[dict[str, Any]]]:
    """Commit the case on the baseline, then `runs` rounds of plain and each gate, the gates'
    order turned each round; the tree is reset before each run (a CI job's fresh checkout)."""
    _git(directory, "checkout", "-q", "-f", "-B", f"case-{case}", ref)
    _git(directory, "clean", "-fdq")
    what = apply_case(directory, gate, case, facts.get("iterations", 0))
    _git(directory, "add", "-A")
    _git(directory, "commit", "-qm", what)
    hot, called = set(facts["hot"]), set(facts["called"])
    timeout_s = max(600.0, 6 * facts["plain_s"])
    rows: dict[str, list[dict[str, Any]]] = {"plain": [], **{g: [] for g in GATES}}
    for k in range(runs):
        order = ["plain", *GATES[k % len(GATES) :], *GATES[: k % len(GATES)]]
        for name in order:
            _git(directory, "reset", "-q", "--hard")
            _git(directory, "clean", "-fdq")
            if name == "plain":
                run = gates.pytest_run(directory, gate, (), timeout_s=timeout_s)
            else:
                run = gated_run(directory, gate, gate_args(name, ref), timeout_s)
            rows[name].append(summarize(run, hot, called, gate.target.function))
            print(f"  {case} run {k + 1} {name}: {_brief(rows[name][-1])}", flush=True)
    return {"change": what, **rows}


def _brief(row: dict[str, Any]) -> str:
    selection = row.get("selection")
    measured = "n/a" if selection is None else len(selection["measured"])
    text = f"rc={row['rc']} wall {row['wall_s']:.1f} s cpu {row['cpu_s']:.1f} s"
    if "failures" in row:
        text += f" measured {measured} failures {len(row['failures'])}"
    return text


# -- the page ------------------------------------------------------------------------------------
def _per_run(values: list[Any]) -> str:
    """One value when every run agrees, else each run's."""
    return (
        str(values[0])
        if values and all(v == values[0] for v in values)
        else ", ".join(map(str, values))
    )


def table(results: dict[str, Any]) -> str:
    """The results as Markdown: one row per case and gate."""
    rows = [
        "| case | gate | runs | wall s (x plain) | CPU s (x plain) | tests measured (calling "
        "the function) | tests failed | caught / named / tests >= 20% | outcomes as plain | "
        "exit status | load |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    hot = len(results["facts"]["hot"])
    for case, found in results["cases"].items():
        plain = found["plain"]
        wall = statistics.median(r["wall_s"] for r in plain)
        cpu = statistics.median(r["cpu_s"] for r in plain)
        for name in ("plain", *GATES):
            runs = found.get(name, [])
            if not runs:
                continue
            w = statistics.median(r["wall_s"] for r in runs)
            c = statistics.median(r["cpu_s"] for r in runs)
            cells = [case, name, str(len(runs)), f"{w:.1f} ({w / wall:.2f}x)"]
            cells.append(f"{c:.1f} ({c / cpu:.2f}x)")
            if name == "plain":
                cells += ["", "", "", ""]
            else:
                measured = [
                    "n/a"
                    if r["selection"] is None
                    else f"{len(r['selection']['measured'])} ({len(r['measured_calling'])})"
                    for r in runs
                ]
                caught = [f"{len(r['caught'])} / {len(r['named'])} / {hot}" for r in runs]
                same = [outcomes_as_plain(r, p) for r, p in zip(runs, plain, strict=True)]
                cells += [
                    _per_run(measured),
                    _per_run([len(r["failures"]) for r in runs]),
                    _per_run(caught) if case.startswith("slow-") else "",
                    "yes" if all(same) else f"**no** in {same.count(False)} run(s)",
                ]
            cells.append(_per_run([r["rc"] for r in runs]))
            loads = [r["load_1m"] for r in runs if "load_1m" in r]
            cells.append(f"{statistics.median(loads):.1f}" if loads else "n/a")
            rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


BEGIN, END = "<!-- results: benchmarks/selection_real_suite.py -->", "<!-- /results -->"


def splice(page: str, results_md: str) -> str:
    """The page with the text between its BEGIN and END markers replaced by `results_md`."""
    if BEGIN not in page or END not in page.split(BEGIN, 1)[1]:
        raise ValueError(f"the page has no {BEGIN} ... {END} section to replace")
    head, rest = page.split(BEGIN, 1)
    return f"{head}{BEGIN}\n{results_md}{END}{rest.split(END, 1)[1]}"


def facts_md(results: dict[str, Any]) -> str:
    facts = results["facts"]
    return (
        f"{facts['python']}; the suite: {facts['tests']} tests, plain run {facts['plain_s']:.1f} s "
        f"(median of {len(facts['plain_runs'])}); `{SUITE.target.function}` called by "
        f"{len(facts['called'])} tests, {len(facts['hot'])} of them spending >= 20% of their CPU "
        f"time in it; the slowdown: {facts['iterations']} iterations per outermost call, read "
        f"{facts['factor']:.2f}x on the function in those tests; `{DEAD[1]}` called "
        f"{facts['dead_calls']} times by the whole suite; instruction counts saved for "
        f"{facts['instruction_tests']}.\n\n"
    )


def suite_facts(directory: Path, gate: Any, plain_runs: int) -> dict[str, Any]:
    """On the sdist's own commit: the plain run's time and tests, who runs the function and
    how much, the dead function's calls (must be 0) and the injection's real factor."""
    _git(directory, "checkout", "-q", "-f", "-B", "selection-bench", _sdist_commit(directory))
    _git(directory, "clean", "-fdq")
    plain = [gates.pytest_run(directory, gate, ()) for _ in range(plain_runs)]
    counts = gates.real_suites.parse_counts(plain[0].output)
    shares = gates.shares(directory, gate)
    dead_calls = check_dead(directory, gate)
    if dead_calls:
        raise RuntimeError(f"{DEAD[1]} is called {dead_calls} times: pick a function no test runs")
    hot = sorted(n for n, s in shares.items() if s >= gates.SHARE_FLOOR)
    iterations, factor = calibrate(lambda n: slowdown_factor(directory, gate, hot, n), SLOWDOWN)
    return {
        "python": f"Python {sys.version.split()[0]}",
        "tests": sum(n for k, n in counts.items() if "subtest" not in k),
        "plain_runs": [r.wall_s for r in plain],
        "plain_s": statistics.median(r.wall_s for r in plain),
        "hot": hot,
        "called": sorted(n for n, s in shares.items() if s > 0),
        "dead_calls": dead_calls,
        "iterations": iterations,
        "factor": factor,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--slow-runs", type=int, default=3)
    parser.add_argument("--unrelated-runs", type=int, default=5)
    parser.add_argument("--plain-runs", type=int, default=3, help="before the cases")
    parser.add_argument(
        "--instruction-save",
        choices=("calling", "all"),
        default="calling",
        help="count the tests that call the function (default) or the whole suite (30-90 min)",
    )
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir(), "selection"))
    parser.add_argument("--out", type=Path, default=OUT, help="writes OUT.json and OUT.md")
    parser.add_argument(
        "--keep-cases", action="store_true", help="keep OUT.json's other cases in the table"
    )
    args = parser.parse_args(argv)
    cases = args.cases.split(",")
    for case in cases:
        if case not in CASES:
            parser.error(f"unknown case {case!r}: one of {', '.join(CASES)}")
    directory = gates.prepare(SUITE, args.cache, args.cache / "suites")
    facts = suite_facts(directory, SUITE, args.plain_runs)
    facts["instruction_tests"] = (
        "the whole suite" if args.instruction_save == "all" else "the tests calling the function"
    )
    print(json.dumps({k: v for k, v in facts.items() if k != "called"}, indent=1), flush=True)
    ref = save_baseline(
        directory, SUITE, None if args.instruction_save == "all" else facts["called"]
    )
    results: dict[str, Any] = {"facts": facts, "baseline_commit": ref, "cases": {}}
    earlier = args.out.with_suffix(".json")
    if args.keep_cases and earlier.exists():
        kept = json.loads(earlier.read_text())
        results["kept"] = {"facts": kept["facts"], "cases": sorted(kept["cases"])}
        results["cases"] = {c: r for c, r in kept["cases"].items() if c not in cases}
    for case in cases:
        runs = args.slow_runs if case.startswith("slow-") else args.unrelated_runs
        results["cases"][case] = run_case(directory, SUITE, case, ref, runs, facts)
        args.out.with_suffix(".json").write_text(json.dumps(results, indent=1))
    results_md = facts_md(results) + table(results)
    print(results_md)
    page = args.out.with_suffix(".md")
    text = page.read_text(encoding="utf-8") if page.exists() else f"{BEGIN}\n{END}\n"
    page.write_text(splice(text, results_md), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
