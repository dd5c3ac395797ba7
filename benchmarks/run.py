"""Overhead and accuracy of pytest-scalene next to Scalene, memray, py-spy, pyinstrument and
cProfile, measured in one run; writes docs/benchmarks.md, benchmarks.json and benchmarks.png.

    .venv/bin/python benchmarks/run.py            # full: 5 rounds, 2-10 s workloads (< 30 min)
    .venv/bin/python benchmarks/run.py --quick    # smaller workloads, 3 rounds (< 5 min)
    .venv/bin/python benchmarks/run.py --render docs/benchmarks.json   # the page again

The first run creates build/bench-venv with the peers from PyPI (benchmarks/requirements-
peers.txt); a peer that cannot be installed or run is reported as such, not left out silently.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import bench_env
import overhead

FULL_SCALE, QUICK_SCALE = 1.0, 0.12
FULL_ROUNDS, QUICK_ROUNDS = 5, 3
STARTUP_EXTRA_ROUNDS = 2  # the empty-test runs take ~3 s a round: a steadier median for free
PARTS = ("overhead", "startup", "touch", "split", "bias")
STARTED = time.perf_counter()


def log(message: str) -> None:
    print(f"[{time.perf_counter() - STARTED:6.0f} s] {message}", flush=True)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller workloads, fewer rounds")
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default 5, quick 3)")
    parser.add_argument(
        "--out",
        type=Path,
        help="where the page, JSON and plot go (default docs/; --quick: build/benchmarks-quick/)",
    )
    parser.add_argument(
        "--workloads",
        help="comma-separated workloads for the overhead part (default: all; --quick: "
        + ", ".join(overhead.QUICK_WORKLOADS)
        + ")",
    )
    parser.add_argument(
        "--only",
        default=",".join(PARTS),
        help=f"comma-separated parts to run ({', '.join(PARTS)})",
    )
    parser.add_argument(
        "--render",
        type=Path,
        metavar="JSON",
        help="measure nothing: write the page again from a benchmarks.json (into its folder)",
    )
    args = parser.parse_args()
    if args.rounds is not None and args.rounds < 1:
        parser.error("--rounds must be >= 1")
    unknown = set(args.only.split(",")) - set(PARTS)
    if unknown:
        parser.error(f"--only: unknown part(s) {', '.join(sorted(unknown))}")
    if args.workloads:
        names = args.workloads.split(",")
        bad = set(names) - {*overhead.WORKLOAD_NAMES, overhead.SUITE}
        if bad:
            parser.error(f"--workloads: unknown workload(s) {', '.join(sorted(bad))}")
        args.workloads = names
    return args


def main() -> None:
    args = parse_args()
    if not os.environ.get(bench_env.MARKER):
        bench_env.ensure_venv(log)
        bench_env.reexec_in_venv()
    import accuracy
    import report
    import targets
    import tools

    if args.render:
        results = json.loads(args.render.read_text())
        log(f"wrote {report.write(results, args.out or args.render.parent)}")
        return
    env = bench_env.current()
    mode = "quick" if args.quick else "full"
    scale = QUICK_SCALE if args.quick else FULL_SCALE
    rounds = args.rounds or (QUICK_ROUNDS if args.quick else FULL_ROUNDS)
    out = args.out or bench_env.ROOT / ("build/benchmarks-quick" if args.quick else "docs")
    parts = set(args.only.split(","))

    def available(tool: tools.Tool) -> bool:
        if tool.needs is None:
            return True
        if tool.needs == "py-spy" and shutil.which("py-spy", path=str(env.bin_dir)) is None:
            return False
        return tool.needs in env.versions

    results: dict[str, object] = {
        "mode": mode,
        "scale": scale,
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": bench_env.machine(),
        "versions": env.versions,
        "missing": env.missing,
        "load_start": round(os.getloadavg()[0], 2),
    }
    log(f"{mode} run, scale {scale}, {rounds} rounds; load average {results['load_start']}")
    work = Path(tempfile.mkdtemp(prefix="pytest-scalene-bench-"))
    ctx = tools.Context(python=sys.executable, bin_dir=env.bin_dir, out_dir=work)
    try:
        raw = {"rounds": rounds, "runs": {}, "failed": {}, "load_average_per_round": []}
        if "overhead" in parts:
            log("overhead")
            chosen = overhead.workloads(available, args.quick, args.workloads)
            raw = overhead.run(ctx, scale, rounds, chosen, log)
        per_workload = overhead.ratios(raw)
        results["overhead"] = {
            "raw": raw,
            "per_workload": per_workload,
            "summary": overhead.summary(per_workload),
        }
        if "startup" in parts:
            log("fixed cost per pytest session (an empty test)")
            startup = overhead.run(
                ctx, scale, rounds + STARTUP_EXTRA_ROUNDS, [overhead.STARTUP], log
            )
            results["startup"] = {"raw": startup, "per_workload": overhead.ratios(startup)}
        empty: dict[str, object] = {"tools": {}, "fractions": [], "points": []}
        acc: dict[str, object] = {"touch": empty, "split": empty, "bias": empty}
        if "touch" in parts:
            log("memory accuracy (512 MiB touch)")
            acc["touch"] = accuracy.touch(ctx, args.quick, available, log)
        if "split" in parts:
            log("Python/native split")
            acc["split"] = accuracy.split(ctx, args.quick, available, log)
        if "bias" in parts:
            log("function bias")
            acc["bias"] = accuracy.bias(ctx, args.quick, available, log)
        results["accuracy"] = acc
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results["load_end"] = round(os.getloadavg()[0], 2)
    results["elapsed_s"] = round(time.perf_counter() - STARTED, 1)
    # CPU of this process and every run it waited for: the wall time on an idle machine.
    used = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    results["cpu_s"] = round(sum(u.ru_utime + u.ru_stime for u in used), 1)
    page = report.write(results, out)
    log(f"wrote {page}")
    for target, measured, ok, why in targets.targets(results):
        print(f"  {targets.verdict(ok):>10}  {target}: {measured} {why}")


if __name__ == "__main__":
    main()
