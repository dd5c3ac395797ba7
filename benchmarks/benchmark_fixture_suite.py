"""A real project's own pytest-benchmark suite under pytest-scalene (docs/pytest-benchmark.md):
cattrs 26.2.1's `bench/` (64 benchmarks of the `benchmark` fixture), from its pinned sdist.

1. Outcomes: the suite run plain (pytest-benchmark disabled), with pytest-benchmark, and under
   each mode of pytest-scalene (--profile with pytest-benchmark and with the stand-in fixture,
   instruction counts, A/B against HEAD), every test's outcome read from JUnit XML: the same in
   every run, and no failed verdict on unchanged code.
2. A 1.2x slowdown of one benchmarked function (a loop of a fixed count per call, calibrated
   with timeit on a representative call), committed nowhere: instruction counts (against counts
   saved at HEAD) and A/B (against HEAD) must fail the benchmarks that pytest-benchmark reads
   at least SLOWED_AT_LEAST slower, naming the function.
3. Cost per benchmark of each mode against pytest-benchmark alone (wall time of one run each).

    python3 -m venv /tmp/bfs/venv
    /tmp/bfs/venv/bin/pip install . -r benchmarks/requirements-benchmark-suite.txt
    /tmp/bfs/venv/bin/python benchmarks/benchmark_fixture_suite.py --markdown out.md --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import real_suites_gates as gates  # noqa: E402

GATE = gates.GateSuite(
    gates.real_suites.Suite(
        "cattrs", "26.2.1", "pytest-benchmark suite", pythonpath="src", args=("bench",)
    ),
    gates.Target(
        "src/cattrs/converters.py",
        "BaseConverter.unstructure_attrs_astuple",
        "cattrs.converters",
        "from attrs import define\n"
        "from cattrs import BaseConverter, UnstructureStrategy\n"
        "@define\n"  # as bench/test_attrs_collections.py's: an attrs class of lists
        "class C:\n"
        "    a: list[int]\n    b: list[float]\n    c: list[str]\n    d: list[int]\n"
        "inst = C(list(range(10)), [1.5] * 10, ['a'] * 10, list(range(10)))\n"
        "made = []\n"
        "def converter():  # made on first use: after the timer wraps the method it binds\n"
        "    if not made:\n"
        "        made.append(BaseConverter(unstruct_strat=UnstructureStrategy.AS_TUPLE))\n"
        "    return made[0]",
        "converter().unstructure(inst)",
    ),
)
SHORT = ("--benchmark-max-time=0.05", "--benchmark-min-rounds=5")
CONFIGS = {  # name -> pytest arguments (unchanged code)
    "plain": ("-p", "no:scalene", "--benchmark-disable"),
    "pytest-benchmark": ("-p", "no:scalene"),
    "profile": ("--profile", "--profile-memory=no"),
    "profile, stand-in": ("-p", "no:benchmark", "--profile", "--profile-memory=no"),
    "instructions (save)": ("--profile-measure=instructions", "--profile-save-baseline"),
    "instructions": ("--profile-measure=instructions", "--profile-compare", "--profile-select=all"),
    "ab": ("--profile-compare-ref=HEAD", "--profile-memory=no", "--profile-select=all"),
}
JUDGED = ("instructions", "ab")  # run again with the slowdown in the working tree


def outcomes(run_dir: Path, args: tuple[str, ...]) -> tuple[gates.Run, dict[str, str]]:
    with tempfile.TemporaryDirectory() as scratch:
        xml = Path(scratch, "junit.xml")
        run = gates.pytest_run(run_dir, GATE, (*args, f"--junitxml={xml}"))
        found = {}
        if xml.exists():
            for case in ET.parse(xml).getroot().iter("testcase"):
                name = f"{case.get('classname')}::{case.get('name')}"
                kinds = {child.tag for child in case}
                found[name] = next((k for k in ("failure", "error", "skipped") if k in kinds), "ok")
        return run, found


SLOWED_AT_LEAST = 1.15  # a benchmark's own slowdown, by pytest-benchmark, that gates must catch


def benchmark_factors(unchanged: Path, slowed: Path) -> dict[str, float]:
    """pytest-benchmark's fastest round of each benchmark, slowed over unchanged."""

    def fastest(path: Path) -> dict[str, float]:
        found = json.loads(path.read_text()).get("benchmarks", [])
        return {b["fullname"]: b["stats"]["min"] for b in found}

    before, after = fastest(unchanged), fastest(slowed)
    return {t: after[t] / before[t] for t in before.keys() & after.keys() if before[t] > 0}


def calibrated(directory: Path, target: float) -> tuple[int, tuple[float, float]]:
    """The spin's iterations per call that timeit reads closest to `target` on the function
    (a call of ~1 us: fixed_iterations' one scaling lands at 1.36x), and the reading."""
    kind = f"slow-{target}"
    iterations = gates.fixed_iterations(directory, GATE, kind)
    tried = {iterations: gates.real_factor(directory, GATE, kind, iterations=iterations)}
    for _ in range(3):
        best = min(tried, key=lambda n: abs(tried[n][0] - target))
        if abs(tried[best][0] - target) < 0.03:
            break
        scaled = max(1, round(best * (target - 1) / max(tried[best][0] - 1, 0.01)))
        if scaled in tried:
            break
        tried[scaled] = gates.real_factor(directory, GATE, kind, iterations=scaled)
    best = min(tried, key=lambda n: abs(tried[n][0] - target))
    return best, tried[best]


def caught(run: gates.Run, wanted: set[str]) -> dict[str, Any]:
    failed = gates.failed_verdicts(run)
    name = GATE.target.function.rsplit(".", 1)[-1]
    hit = {t for t in failed if t in wanted}
    named = {t for t in hit if any(name in str(v.get("message")) for v in failed[t])}
    return {
        "caught": len(hit),
        "named": len(named),
        "wanted": len(wanted),
        "others_failed": sorted(set(failed) - wanted),
        "missed": sorted(wanted - hit),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=Path("/tmp/bfs"))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--markdown", type=Path)
    options = parser.parse_args(argv)
    options.cache.mkdir(parents=True, exist_ok=True)
    directory = gates.prepare(GATE, options.cache, options.cache / "work")
    gates.restore(directory)
    results: dict[str, Any] = {"python": sys.version.split()[0], "runs": {}}
    reference: dict[str, str] | None = None
    timings = options.cache / "timings"
    timings.mkdir(exist_ok=True)
    for name, args in CONFIGS.items():
        if name == "pytest-benchmark":  # its own timings, against the slowed run's below
            args = (*args, f"--benchmark-json={timings / 'unchanged.json'}")
        run, found = outcomes(directory, args)
        same = reference is None or found == reference
        reference = reference or found
        results["runs"][name] = {
            "wall_s": round(run.wall_s, 2),
            "rc": run.rc,
            "tests": len(found),
            "outcomes_as_plain": same,
            "failed_verdicts": sorted(gates.failed_verdicts(run)),
            "not_judged": gates.not_judged(run),
        }
        print(name, results["runs"][name], flush=True)
    # The share of the benchmarked call, over pytest-benchmark's calibrated calls (SHORT
    # rounds), not of the test's own set-up (its attrs classes, its converter).
    share = gates.shares(directory, GATE, args=SHORT)
    results["shares"] = {t: round(s, 3) for t, s in sorted(share.items()) if s > 0}
    iterations, factor = calibrated(directory, 1.2)
    results["slowdown"] = {"iterations": iterations, "timeit": [round(f, 3) for f in factor]}
    gates.inject(directory, GATE.target, "slow-1.2", iterations)
    try:
        # The spin is the same in every call, so a benchmark of bigger calls slows less than
        # the representative call: each benchmark's own slowdown is pytest-benchmark's reading
        # (its fastest round, slowed over unchanged), and the gates must catch those that read
        # at least SLOWED_AT_LEAST.
        slowed_json = timings / "slowed.json"
        gates.pytest_run(
            directory, GATE, (*CONFIGS["pytest-benchmark"], f"--benchmark-json={slowed_json}")
        )
        slowed = benchmark_factors(timings / "unchanged.json", slowed_json)
        results["benchmark_factors"] = {t: round(f, 3) for t, f in sorted(slowed.items())}
        wanted = {t for t, f in slowed.items() if f >= SLOWED_AT_LEAST and share.get(t, 0) > 0}
        print("slow-1.2", results["slowdown"], "benchmarks slowed:", len(wanted), flush=True)
        for name in JUDGED:
            run = gates.pytest_run(directory, GATE, CONFIGS[name])
            results[f"slow-1.2 {name}"] = {"wall_s": round(run.wall_s, 2), **caught(run, wanted)}
            print(name, results[f"slow-1.2 {name}"], flush=True)
    finally:
        gates.restore(directory)
    if options.json:
        options.json.write_text(json.dumps(results, indent=1))
    if options.markdown:
        options.markdown.write_text(markdown(results))
    return 0


def markdown(results: dict[str, Any]) -> str:
    runs = results["runs"]
    alone = runs["pytest-benchmark"]["wall_s"]
    count = runs["plain"]["tests"] or 1
    rows = [
        "| run | wall s | per benchmark | x pytest-benchmark alone | outcomes as plain |"
        " failed verdicts | not judged | exit |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, run in runs.items():
        rows.append(
            f"| {name} | {run['wall_s']:.1f} | {run['wall_s'] / count:.2f} s |"
            f" {run['wall_s'] / alone:.2f}x | {'yes' if run['outcomes_as_plain'] else '**no**'} |"
            f" {len(run['failed_verdicts'])} | {run['not_judged']} | {run['rc']} |"
        )
    slow = results["slowdown"]
    rows += [
        "",
        f"slow-1.2: {slow['iterations']} iterations per call; timeit reads the function"
        f" {slow['timeit'][0]:.2f}x, the representative call {slow['timeit'][1]:.2f}x.",
        "",
        f"| gate | caught / named / benchmarks slowed >= {SLOWED_AT_LEAST}x by pytest-benchmark's"
        " reading | other benchmarks failed | wall s |",
        "|---|---|---|---|",
    ]
    for name in JUDGED:
        found = results[f"slow-1.2 {name}"]
        rows.append(
            f"| {name} | {found['caught']} / {found['named']} / {found['wanted']} |"
            f" {len(found['others_failed'])} | {found['wall_s']:.1f} |"
        )
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    sys.exit(main())
