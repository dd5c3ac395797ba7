"""Measures what the A/B mode's constants rest on: per-pair CPU-time ratios of the
benchmarks/verdicts.py suite, baseline vs current, over a fixed number of pairs (no early
stop), for unchanged code and for one function slowed by each factor. Prints, per factor, the
median ratio after 10, 20 and 40 pairs for every test and repetition, and writes them as JSON.

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
from verdicts import SUITE  # noqa: E402

from pytest_scalene.ab import session, verdict  # noqa: E402


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def suite(factor: float) -> str:
    return SUITE.replace('float(os.environ.get("SLOW_FACTOR", "1"))', repr(factor))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=40)
    parser.add_argument("--factors", default="1.0,1.2")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "ab_noise.json")
    args = parser.parse_args()
    verdict.STAGES = (verdict.Stage(args.pairs, None, 99.0),)  # measure, never stop early
    found: dict[str, list[list[float]]] = {}
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
                setup = session.Setup(
                    root=repo.resolve(), rootdir=repo.resolve(), commit=commit, ref="base"
                )
                result = session.run(setup, ids)
                for nodeid, outcome in result.outcomes.items():
                    found.setdefault(f"{factor} {nodeid}", []).append(outcome.ratios)
                    r = outcome.ratios
                    print(
                        f"{factor} rep {rep} {nodeid.split('::')[1]}: "
                        + " ".join(
                            f"m{n}={statistics.median(r[:n]):.3f}"
                            for n in (10, 20, 40)
                            if len(r) >= n
                        )
                        + (f" {outcome.note}" if outcome.note else ""),
                        flush=True,
                    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(found))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
