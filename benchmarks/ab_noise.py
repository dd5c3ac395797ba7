"""Measures what the A/B mode's constants rest on: per-pair CPU-time ratios of the
benchmarks/verdicts.py suite, baseline vs current, over a fixed number of pairs (no early
stop), for unchanged code and for one function slowed by each factor. Prints, per factor, the
median ratio after 10, 20 and 40 pairs for every test and repetition, and per function the
function rule's ratio and z (verdict.judge_functions) after the same numbers of pairs: the slowed
function's, and the highest of the other functions; writes them as JSON.

    .venv/bin/python benchmarks/ab_noise.py --reps 5 --factors 1.0,1.2 --out build/ab_noise.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from verdicts import SUITE, TESTS  # noqa: E402

from pytest_scalene.compare_ref import ab_run, ab_statistic  # noqa: E402


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def suite(factor: float) -> str:
    return SUITE.replace('float(os.environ.get("SLOW_FACTOR", "1"))', repr(factor))


def function_stats(outcome: object, slowed: str) -> dict[str, list[float]]:
    """After 10, 20 and 40 pairs: the slowed function's ratio and z, and the highest ratio and
    z of the other functions."""
    seen: dict[str, list[float]] = {}
    for n in (10, 20, 40):
        ratios = outcome.ratios[:n]  # type: ignore[attr-defined]
        if len(ratios) < n:
            continue
        judged = ab_statistic.judge_functions(
            ratios,
            outcome.baseline_runs[:n],  # type: ignore[attr-defined]
            outcome.current_runs[:n],  # type: ignore[attr-defined]
            min_samples=0,
        )
        mine = [f for f in judged if f.function == slowed]
        others = [f for f in judged if f.function != slowed]
        if mine:
            seen[f"slowed r/z/n@{n}"] = [mine[0].ratio, mine[0].z, min(mine[0].samples)]
        if others:
            top = max(others, key=lambda f: f.z)
            seen[f"other max z r/z/n@{n}"] = [top.ratio, top.z, min(top.samples)]
            seen[f"other max r@{n}"] = [max(f.ratio for f in others)]
    return seen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=40)
    parser.add_argument("--factors", default="1.0,1.2")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "ab_noise.json")
    args = parser.parse_args()
    ab_statistic.STAGES = (ab_statistic.Stage(args.pairs, None, 99.0),)  # measure, never stop early
    ab_statistic.FUNCTION_MAX_PAIRS = args.pairs
    ab_statistic.FUNCTION_FAIL_ABOVE = ab_statistic.FUNCTION_Z = 99.0
    found: dict[str, list[list[float]]] = {}
    functions: dict[str, list[dict[str, list[float]]]] = {}
    with tempfile.TemporaryDirectory(prefix="ab-noise-") as tmp:
        repo = Path(tmp)
        git(repo, "init", "-q")
        (repo / "pytest.ini").write_text("[pytest]\n")
        (repo / "test_suite.py").write_text(suite(1.0))
        git(repo, "add", "-A")
        git(repo, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "base")
        commit = git(repo, "rev-parse", "HEAD")
        ids = [
            f"test_suite.py::{n}"
            for n in (
                "test_python_loop",
                "test_dict_str",
                "test_numpy",
                "test_files_json",
                "test_threaded",
                "test_under_5ms",
            )
        ]
        for factor in (float(f) for f in args.factors.split(",")):
            (repo / "test_suite.py").write_text(suite(factor))
            for rep in range(args.reps):
                setup = ab_run.Setup(
                    root=repo.resolve(), rootdir=repo.resolve(), commit=commit, ref="base"
                )
                result = ab_run.run(setup, ids)
                for nodeid, outcome in result.outcomes.items():
                    found.setdefault(f"{factor} {nodeid}", []).append(outcome.ratios)
                    r = outcome.ratios
                    seen = function_stats(outcome, TESTS[nodeid.split("::")[1]])
                    functions.setdefault(f"{factor} {nodeid}", []).append(seen)
                    print(
                        f"{factor} rep {rep} {nodeid.split('::')[1]}: "
                        + " ".join(
                            f"m{n}={statistics.median(r[:n]):.3f}"
                            for n in (10, 20, 40)
                            if len(r) >= n
                        )
                        + (f" {outcome.note}" if outcome.note else "")
                        + "".join(
                            f" | {k}: " + " ".join(f"{v:.3f}" for v in vs) for k, vs in seen.items()
                        ),
                        flush=True,
                    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"ratios": found, "functions": functions}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
