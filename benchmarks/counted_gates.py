"""The counted gates in repeated comparisons: how often unchanged code fails (goal: never) and how
often a 2x growth fails naming its line (goal: every time), for a copy-heavy and an
allocation-heavy test. Writes the "Counted gates" section of docs/benchmarks.md.

    .venv/bin/python benchmarks/counted_gates.py             # 50 comparisons of each (~10 min)
    .venv/bin/python benchmarks/counted_gates.py --runs 3 --out build/counted-gates.md

Each baseline is saved once, by one `pytest --profile --profile-save-baseline` (the copy test's
also once more while CPU-bound processes load every core), then every comparison is its own
`pytest --profile --profile-compare` process, the cases interleaved. Beside the verdicts, the copy
rate rule that judged copy volume before (MB/s: +75% and one threshold's MB per second of the
test) is replayed on each comparison's figures, to show what it would have said.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SECTION = "counted-gates"  # the kept block of docs/benchmarks.md (report.py leaves it in place)
SUITES = ROOT / "tests" / "data" / "counted_gates"  # shared with tests/test_counted_gates.py
COPY_SUITE = (SUITES / "copy_heavy.py").read_text()
ALLOC_SUITE = (SUITES / "alloc_heavy.py").read_text()
RATE_TOLERANCE = 0.75  # the copy-rate rule as it was (comparison.py before counted copies)
RATE_FLOOR_MB = 10485767 / 2**20  # one memory threshold's MB per second of the test
BUSY_LOOPS = 3


@dataclass(frozen=True)
class Case:
    name: str  # directory and label
    module: str
    saved_from: str  # the source the baseline is saved from
    compared: str  # the source compared
    busy_save: bool = False
    metric: str = ""  # a growth case: the metric that must fail...
    line: str = ""  # ...at this "file:line function"


@dataclass
class Tally:
    runs: int = 0
    failed: int = 0
    named: int = 0  # failed with `metric` at `line`
    rate_failed: int = 0  # the old copy-rate rule on the same figures
    example: str = ""  # a message naming the line
    reasons: list[str] = field(default_factory=list)
    figures: list[str] = field(default_factory=list)


CASES = (
    Case("copy", "test_copies.py", COPY_SUITE, COPY_SUITE),
    Case("copy-busy-save", "test_copies.py", COPY_SUITE, COPY_SUITE, busy_save=True),
    Case("alloc", "test_allocs.py", ALLOC_SUITE, ALLOC_SUITE),
    Case(
        "copy-2x",
        "test_copies.py",
        COPY_SUITE,
        COPY_SUITE.replace("COPIES = 4", "COPIES = 8"),
        metric="copy_mb",
        line="test_copies.py:7 copies",
    ),
    Case(
        "alloc-2x",
        "test_allocs.py",
        ALLOC_SUITE,
        ALLOC_SUITE.replace("BLOCKS = 4", "BLOCKS = 8"),
        metric="alloc_mb",
        line="test_allocs.py:7 allocate",
    ),
)


def pytest_run(directory: Path, *args: str) -> tuple[int, dict]:
    out = directory / "profile.json"
    out.unlink(missing_ok=True)
    command = [sys.executable, "-m", "pytest", "--profile", f"--profile-json={out}"]
    command += ["-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-q", *args]
    done = subprocess.run(command, cwd=directory, capture_output=True, text=True, timeout=600)
    if not out.exists():
        raise RuntimeError(f"no profile from {command} in {directory}:\n{done.stdout[-2000:]}")
    return done.returncode, json.loads(out.read_text())


@contextmanager
def busy_machine() -> Iterator[None]:
    """CPU-bound processes on every core, ended by their own ids."""
    code = "while True:\n    pass\n"
    loops = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(BUSY_LOOPS)]
    try:
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def only_test(profile: dict) -> dict:
    [test] = profile["tests"].values()
    return test


def save(case: Case, work: Path) -> dict:
    directory = work / case.name
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    (directory / "pytest.ini").write_text("[pytest]\n")  # the rootdir: paths relative to it
    (directory / case.module).write_text(case.saved_from)
    if case.busy_save:
        with busy_machine():
            code, profile = pytest_run(directory, "--profile-save-baseline")
    else:
        code, profile = pytest_run(directory, "--profile-save-baseline")
    if code != 0:
        raise RuntimeError(f"{case.name}: the baseline run failed")
    (directory / case.module).write_text(case.compared)
    return only_test(profile)


def rate_rule_fails(saved: dict, now: dict) -> bool:
    before, after = saved.get("copy_mb_s", 0.0), now.get("copy_mb_s", 0.0)
    elapsed = min(saved["elapsed_s"], now["elapsed_s"]) or max(saved["elapsed_s"], now["elapsed_s"])
    floor = RATE_FLOOR_MB / max(elapsed, 0.01)
    return after > before * (1 + RATE_TOLERANCE) and after - before > floor


def compare(case: Case, work: Path, saved: dict, tally: Tally) -> None:
    code, profile = pytest_run(work / case.name, "--profile-compare")
    test = only_test(profile)
    failed = [v for v in test.get("verdicts", []) if not v["passed"]]
    tally.runs += 1
    tally.failed += code != 0
    named = [v["message"] for v in failed if (v["metric"], v["line"]) == (case.metric, case.line)]
    tally.named += bool(named)
    tally.example = tally.example or (named[0] if named else "")
    tally.rate_failed += rate_rule_fails(saved, test)
    tally.reasons += [v["message"] for v in failed]
    tally.figures.append(
        f"copy {test.get('copy_mb', 0):.1f} MB, {test.get('copy_mb_s', 0):.1f} MB/s; "
        f"alloc {test.get('alloc_mb', 0):.1f} MB; cpu "
        f"{test['cpu_python_s'] + test['cpu_native_s'] + test['cpu_system_s']:.3f} s"
    )


def load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def section(results: dict) -> str:
    tallies: dict[str, Tally] = results["tallies"]
    saved: dict[str, dict] = results["saved"]
    runs = tallies["copy"].runs

    def rate(name: str) -> str:
        return f"{saved[name]['copy_mb_s']:.1f} MB/s"

    unchanged = [
        ("copy-heavy (16 MB copied 4 times, a loop)", "copy", "no added load"),
        ("copy-heavy", "copy-busy-save", f"{BUSY_LOOPS} added CPU-bound processes"),
        ("allocation-heavy (4 x 16 MB kept, a loop)", "alloc", "no added load"),
    ]
    rows = [
        f"| {label} | {where} | {tallies[n].runs} | **{tallies[n].failed}** | "
        + (f"{tallies[n].rate_failed} (baseline {rate(n)})" if "copy" in n else "-")
        + " |"
        for label, n, where in unchanged
    ]
    grown = [("2x copies", "copy-2x"), ("2x allocation", "alloc-2x")]
    found = [
        f"| {label} | {tallies[n].runs} | {tallies[n].failed} | **{tallies[n].named}** | "
        f"{tallies[n].example or '-'} |"
        for label, n in grown
    ]
    return "\n".join(
        [
            "## Counted gates",
            "",
            f"Generated by `python benchmarks/counted_gates.py` on {results['date']} "
            f"({results['python']}, {results['seconds']:.0f} s; load average at the start and "
            f"end: {results['load_start']} / {results['load_end']}). Each baseline saved once "
            f"with `pytest --profile --profile-save-baseline` (one run); then {runs} "
            "comparisons of each case, each its own `pytest --profile --profile-compare` "
            "process, the cases interleaved. Every gate was on (CPU time too): a false failure "
            "is any failed run of unchanged code. The last column replays the copy-rate rule "
            "that judged copy volume before (MB/s, +75%) on the same runs' figures.",
            "",
            "| unchanged test | baseline saved on | comparisons | failed (goal 0) | "
            "the rate rule would have failed |",
            "|---|---|---|---|---|",
            *rows,
            "",
            "| growth | comparisons | failed | failed naming the line (goal all) | message |",
            "|---|---|---|---|---|",
            *found,
        ]
    )


def write_section(page: Path, text: str, section: str = SECTION) -> None:
    """Replace (or append) the kept block `section` of `page` (report.py leaves it in place)."""
    begin, end = f"<!-- kept: {section} -->", f"<!-- /kept: {section} -->"
    block = f"{begin}\n{text}\n{end}\n"
    old = page.read_text() if page.exists() else ""
    if begin in old and end in old:
        head, rest = old.split(begin, 1)
        new = head + block + rest.split(end, 1)[1].lstrip("\n")
    else:
        new = old.rstrip("\n") + "\n\n" + block if old else block
    page.write_text(new)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50, help="comparisons of each case")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks.md")
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "counted-gates")
    args = parser.parse_args()
    started, load_start = time.perf_counter(), load()
    saved = {case.name: save(case, args.work) for case in CASES}
    tallies = {case.name: Tally() for case in CASES}
    for attempt in range(args.runs):
        for case in CASES:
            compare(case, args.work, saved[case.name], tallies[case.name])
        print(
            f"[{time.perf_counter() - started:5.0f} s] round {attempt + 1}: "
            + ", ".join(f"{n} {t.failed}/{t.runs}" for n, t in tallies.items()),
            flush=True,
        )
    results = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "python": f"Python {platform.python_version()}",
        "seconds": time.perf_counter() - started,
        "load_start": load_start,
        "load_end": load(),
        "saved": saved,
        "tallies": tallies,
    }
    raw = {n: t.__dict__ for n, t in tallies.items()}
    (args.work / "results.json").write_text(json.dumps({"saved": saved, "tallies": raw}, indent=1))
    write_section(args.out, section(results))
    print(section(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
