"""CPU verdicts side by side: how often unchanged code fails (goal: never) and how often an
injected 1.2x and 1.5x slowdown of one function is caught, naming it (goal: every time), under
the instruction-count mode, the stored-time rule and the A/B mode against a git ref
(`--modes ab`). Writes the "CPU verdicts" section of docs/benchmarks.md.

    .venv/bin/python benchmarks/verdicts.py                      # 50 / 20 / 20 (instructions)
    build/venv-3.12/bin/python benchmarks/verdicts.py            # per-function names (3.12+)
    .venv/bin/python benchmarks/verdicts.py --unchanged 3 --detect 2 --out build/verdicts.md

A suite of six tests of different kinds (a pure-Python loop, dict and str work with hashing,
numpy, tmp files and json, a worker thread, one under 5 ms), each with its own function
`slowed_*` whose work grows by SLOW_FACTOR. Each mode saves its baseline once, then every
comparison is its own pytest process: the unchanged ones first, then the slowdowns, with the
factor injected into every test's slowed function at once (one function per test).

The A/B mode (`ab`) needs no saved baseline: the suite lives in a temporary git repository with
a baseline commit (factor 1.0), and each comparison runs `--profile-compare-ref=<baseline
commit>` from the baseline commit itself (unchanged) or from a commit on top of it that slows
each test's function by the factor.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SECTION = "cpu-verdicts"
sys.path.insert(0, str(ROOT / "benchmarks"))
from counted_gates import write_section  # noqa: E402  (the kept-block writer)

SUITE = """
import json, os, threading
import numpy as np

F = float(os.environ.get("SLOW_FACTOR", "1"))


def steady_loop(n):
    acc = 0
    for i in range(n):
        acc += i * i % 7
    return acc


def slowed_loop(n):
    acc = 0
    for i in range(int(n * F)):
        acc += i * i % 7
    return acc


def test_python_loop():
    assert steady_loop(150_000) + slowed_loop(100_000) > 0


def slowed_words(n):
    counts = {}
    for i in range(int(n * F)):
        word = f"w{i % 997}-{i % 13}"
        counts[word] = counts.get(word, 0) + 1
    return counts


def test_dict_str():
    words = {str(i): i for i in range(20_000)}
    assert len(slowed_words(60_000)) > 0 and len(words) == 20_000


def slowed_sort(n):
    data = np.random.default_rng(1).random(int(n * F))
    data.sort()
    return data


def test_numpy():
    base = np.random.default_rng(2).random(300_000)
    base.sort()
    assert slowed_sort(300_000)[0] <= base[-1] + 1


def slowed_records(n):
    return [{"id": i, "name": f"item {i}", "tags": ["a", "b"]} for i in range(int(n * F))]


def test_files_json(tmp_path):
    path = tmp_path / "data.json"
    path.write_text(json.dumps(slowed_records(8_000)))
    assert len(json.loads(path.read_text())) > 0


def slowed_worker(n, out):
    out.append(sum(i * i % 5 for i in range(int(n * F))))


def test_threaded():
    out = []
    worker = threading.Thread(target=slowed_worker, args=(120_000, out))
    worker.start()
    steady_loop(60_000)
    worker.join()
    assert out


def slowed_tiny(n):
    return sum(i * i % 3 for i in range(int(n * F)))


def test_under_5ms():
    assert slowed_tiny(3_000) + steady_loop(1_000) >= 0
"""
TESTS = {
    "test_python_loop": "slowed_loop",
    "test_dict_str": "slowed_words",
    "test_numpy": "slowed_sort",
    "test_files_json": "slowed_records",
    "test_threaded": "slowed_worker",
    "test_under_5ms": "slowed_tiny",
}
MODES = {
    "instructions": ["--profile-measure=instructions"],
    "time": ["--profile", "--profile-memory=no"],  # the stored-time rule, its defaults
    "ab": ["--profile-memory=no"],  # and --profile-compare-ref=<the baseline commit>
}
FAILED = re.compile(r"^FAILED \S+::(\w+) - ", re.MULTILINE)


@dataclass
class Tally:
    runs: int = 0
    failed: dict[str, int] = field(default_factory=dict)
    named: dict[str, int] = field(default_factory=dict)
    seconds: list[float] = field(default_factory=list)
    ratios: list[dict[str, tuple[float, int]]] = field(default_factory=list)  # the A/B mode
    figures: dict[str, list[float]] = field(default_factory=dict)  # the judged figure per test
    by_function: dict[str, int] = field(default_factory=dict)  # A/B: failed by a function alone

    def spread(self, test: str) -> str:
        """max / min - 1 of the judged figure over the runs (the unchanged code's noise)."""
        values = [v for v in self.figures.get(test, []) if v > 0]
        return f"{max(values) / min(values) - 1:.1e}" if len(values) > 1 else "-"


def pytest(work: Path, python: str, args: list[str], factor: float = 1.0) -> tuple[str, float]:
    env = {**os.environ, "SLOW_FACTOR": str(factor)}
    command = [python, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rf", "--tb=short", *args]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True)
    return done.stdout + done.stderr, time.perf_counter() - started


def judge(text: str, tally: Tally) -> None:
    """Count the failed tests, and those whose message names their slowed function."""
    tally.runs += 1
    failures = dict.fromkeys(FAILED.findall(text), True)
    for test in failures:
        tally.failed[test] = tally.failed.get(test, 0) + 1
    blocks = re.split(r"^_{3,} (\w+) _{3,}$", text, flags=re.MULTILINE)
    for name, body in zip(blocks[1::2], blocks[2::2], strict=False):
        if name in failures and TESTS.get(name, "?") in body:
            tally.named[name] = tally.named.get(name, 0) + 1


def git(work: Path, *args: str) -> str:
    command = ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost", *args]
    done = subprocess.run(command, cwd=work, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def fixed_suite(factor: float) -> str:
    """The suite with its factor in the code, as a commit holds it."""
    return SUITE.replace('float(os.environ.get("SLOW_FACTOR", "1"))', repr(factor))


def run_ab(python: str, work: Path, unchanged: int, detect: int) -> dict[str, Tally]:
    """The A/B mode: a git repository with a baseline commit; slowed commits on top of it."""
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    git(work, "init", "-q")
    (work / "pytest.ini").write_text("[pytest]\n")
    (work / "test_suite.py").write_text(fixed_suite(1.0))
    git(work, "add", "-A")
    git(work, "commit", "-qm", "baseline")
    base = git(work, "rev-parse", "HEAD")
    plain, plain_s = pytest(work, python, ["-p", "no:scalene"])
    tallies = {"unchanged": Tally(), "1.2x": Tally(), "1.5x": Tally(), "plain": Tally()}
    tallies["plain"].seconds.append(plain_s)
    args = [*MODES["ab"], f"--profile-compare-ref={base}", f"--profile-json={work}/ab.json"]
    for label, factor, runs in (
        ("unchanged", 1.0, unchanged),
        ("1.2x", 1.2, detect),
        ("1.5x", 1.5, detect),
    ):
        if factor != 1.0:
            git(work, "checkout", "-q", base)
            (work / "test_suite.py").write_text(fixed_suite(factor))
            git(work, "commit", "-qam", f"slowed {factor}x")
        for i in range(runs):
            text, seconds = pytest(work, python, args)
            judge(text, tallies[label])
            tallies[label].seconds.append(seconds)
            ab = ab_results(work / "ab.json")
            for test in function_failures(work / "ab.json"):
                tallies[label].by_function[test] = tallies[label].by_function.get(test, 0) + 1
            tallies[label].ratios.append(ab)
            for test, (ratio, _) in ab.items():  # the figure this mode judges
                tallies[label].figures.setdefault(test, []).append(ratio)
            shown = " ".join(f"{t[5:]}={r}x/{n}" for t, (r, n) in sorted(ab.items()))
            print(f"ab {label} {i + 1}/{runs}: failed {sorted(FAILED.findall(text))} {shown}")
    return tallies


def ab_results(path: Path) -> dict[str, tuple[float, int]]:
    """Per test: the median paired ratio and the number of pairs it took."""
    try:
        tests = json.loads(path.read_text())["tests"]
    except (OSError, ValueError, KeyError):
        return {}
    found = {}
    for nodeid, test in tests.items():
        ab = test.get("ab") or {}
        if "ratio" in ab:
            found[nodeid.split("::")[-1]] = (ab["ratio"], ab["pairs"])
    return found


def function_failures(path: Path) -> list[str]:
    """The tests that failed by the function rule while the test's own rule passed."""
    try:
        tests = json.loads(path.read_text())["tests"]
    except (OSError, ValueError, KeyError):
        return []
    return [
        nodeid.split("::")[-1]
        for nodeid, test in tests.items()
        if (test.get("ab") or {}).get("verdict") == "fail"
        and (test.get("ab") or {}).get("test_verdict") != "fail"
    ]


def record_figures(path: Path, mode: str, tally: Tally) -> None:
    """The figure each mode judges, per test: instructions, or CPU seconds."""
    try:
        tests = json.loads(path.read_text())["tests"]
    except (OSError, ValueError, KeyError):
        return
    for nodeid, test in tests.items():
        if mode == "instructions":
            value = test.get("instructions")
        else:
            value = sum(test.get(k, 0.0) for k in ("cpu_python_s", "cpu_native_s", "cpu_system_s"))
        if isinstance(value, (int, float)):
            tally.figures.setdefault(nodeid.split("::")[-1], []).append(float(value))


def run_mode(mode: str, python: str, work: Path, unchanged: int, detect: int) -> dict[str, Tally]:
    if mode == "ab":
        return run_ab(python, work, unchanged, detect)
    work.mkdir(parents=True, exist_ok=True)
    (work / "test_suite.py").write_text(SUITE)
    (work / "pytest.ini").write_text("[pytest]\n")
    args = MODES[mode]
    saved, save_s = pytest(work, python, [*args, "--profile-save-baseline"])
    if "6 passed" not in saved:
        raise SystemExit(f"{mode}: the baseline save failed:\n{saved[-3000:]}")
    plain, plain_s = pytest(work, python, ["-p", "no:scalene"])
    tallies = {"unchanged": Tally(), "1.2x": Tally(), "1.5x": Tally()}
    tallies["unchanged"].seconds += [save_s]
    tallies["plain"] = Tally(seconds=[plain_s])
    for label, factor, runs in (
        ("unchanged", 1.0, unchanged),
        ("1.2x", 1.2, detect),
        ("1.5x", 1.5, detect),
    ):
        for i in range(runs):
            profile = work / "profile.json"
            profile.unlink(missing_ok=True)
            compare = [*args, "--profile-compare", f"--profile-json={profile}"]
            text, seconds = pytest(work, python, compare, factor)
            judge(text, tallies[label])
            record_figures(profile, mode, tallies[label])
            tallies[label].seconds.append(seconds)
            print(
                f"{mode} {label} {i + 1}/{runs}: failed {sorted(FAILED.findall(text))}", flush=True
            )
    return tallies


def _cell(tally: Tally, test: str, detect: bool) -> str:
    failed = tally.failed.get(test, 0)
    if not detect:
        return f"{failed}/{tally.runs}"
    return f"{failed}/{tally.runs} ({tally.named.get(test, 0)} named)"


def section(results: dict[str, dict[str, Tally]], python: str, minutes: float) -> str:
    version = subprocess.run(
        [python, "-c", "import sys; print(sys.version.split()[0])"], capture_output=True, text=True
    ).stdout.strip()
    title = "CPU verdicts, A/B against a git ref" if list(results) == ["ab"] else "CPU verdicts"
    lines = [
        f"## {title} (Python {'.'.join(version.split('.')[:2])})",
        "",
        f"`benchmarks/verdicts.py`, Python {version}, {datetime.now(timezone.utc):%Y-%m-%d}, "
        f"{minutes:.0f} min, on this shared 2-core VM. Six tests of different kinds, each with one "
        "function whose work is multiplied by 1.2 or 1.5; "
        + (
            "a git repository with a baseline commit and a slowed commit on top, each "
            "comparison its own pytest process against the baseline commit. "
            if list(results) == ["ab"]
            else "a baseline saved once per mode, then each comparison its own pytest process. "
        )
        + "Cells: failed comparisons / comparisons "
        "(how many of the failures named the slowed function); the spread is max / min - 1 of "
        "the figure each mode judges (instructions, CPU seconds, or the A/B median ratio) over "
        "the unchanged runs.",
        "",
        "| mode | test | unchanged: false failures | spread of the judged figure, unchanged | "
        "1.2x caught | 1.5x caught |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for mode, tallies in results.items():
        for test in TESTS:
            lines.append(
                f"| {mode} | `{test}` | {_cell(tallies['unchanged'], test, False)} | "
                f"{tallies['unchanged'].spread(test)} | "
                f"{_cell(tallies['1.2x'], test, True)} | {_cell(tallies['1.5x'], test, True)} |"
            )
    lines += ["", "| mode | one comparison (6 tests), median | plain pytest | per test, added |"]
    lines += ["| --- | --- | --- | --- |"]
    for mode, tallies in results.items():
        saved = 0 if mode == "ab" else 1  # the other modes' first run saves the baseline
        runs = sorted(tallies["unchanged"].seconds[saved:] or tallies["unchanged"].seconds)
        median = runs[len(runs) // 2]
        plain = tallies["plain"].seconds[0]
        lines.append(f"| {mode} | {median:.1f} s | {plain:.1f} s | {(median - plain) / 6:.2f} s |")
    if "ab" in results:
        lines += ["", *ab_table(results["ab"])]
    return "\n".join(lines) + "\n"


def ab_table(tallies: dict[str, Tally]) -> list[str]:
    """The A/B mode's medians of paired ratios: the highest on unchanged code, the lowest on
    slowed code, and the pairs each comparison took (the sequential rule stops early)."""
    lines = [
        "A/B mode, per test: the median of its paired CPU-time ratios (current / baseline) in "
        "each comparison, the pairs it took (10 to 40), and how many comparisons failed by the "
        "function rule while the test's median ratio passed.",
        "",
        "| test | unchanged: highest | unchanged: pairs (median) | 1.2x: lowest | 1.5x: lowest "
        "| failed by the function rule alone: unchanged / 1.2x / 1.5x |",
        "| --- | --- | --- | --- | --- | --- |",
    ]

    def values(label: str, test: str) -> list[tuple[float, int]]:
        return [run[test] for run in tallies[label].ratios if test in run]

    for test in TESTS:
        same = values("unchanged", test)
        pairs = sorted(n for _, n in same)
        cells = [
            f"{max(r for r, _ in same):.3f}" if same else "-",
            str(pairs[len(pairs) // 2]) if pairs else "-",
        ]
        for label in ("1.2x", "1.5x"):
            slowed = values(label, test)
            cells.append(f"{min(r for r, _ in slowed):.3f}" if slowed else "-")
        cells.append(
            " / ".join(
                str(tallies[k].by_function.get(test, 0)) for k in ("unchanged", "1.2x", "1.5x")
            )
        )
        lines.append(f"| `{test}` | " + " | ".join(cells) + " |")
    return lines


def _load(path: Path) -> dict[str, dict[str, Tally]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {m: {k: Tally(**t) for k, t in r.items()} for m, r in data.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unchanged", type=int, default=50)
    parser.add_argument("--detect", type=int, default=20)
    parser.add_argument("--time-unchanged", type=int, default=20, help="the stored-time rule")
    parser.add_argument("--time-detect", type=int, default=10)
    parser.add_argument("--ab-unchanged", type=int, default=50, help="the A/B mode")
    parser.add_argument("--ab-detect", type=int, default=20)
    parser.add_argument("--modes", default="instructions,time")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks.md")
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "verdicts")
    args = parser.parse_args()
    started = time.perf_counter()
    version = subprocess.run(
        [args.python, "-c", "import sys; print(f'{sys.version_info[0]}{sys.version_info[1]}')"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    # The modes not run now keep their last results for this interpreter.
    kept = args.work / f"results-{version}.json"
    results = _load(kept)
    for mode in args.modes.split(","):
        counts = {
            "instructions": (args.unchanged, args.detect),
            "ab": (args.ab_unchanged, args.ab_detect),
        }.get(mode, (args.time_unchanged, args.time_detect))
        results[mode] = run_mode(mode, args.python, args.work / f"{mode}-{version}", *counts)
    kept.write_text(
        json.dumps({m: {k: asdict(t) for k, t in r.items()} for m, r in results.items()})
    )
    minutes = (time.perf_counter() - started) / 60
    # One block per interpreter, and the A/B mode's apart (it needs a git repository).
    ran = args.modes.split(",")
    text = ""
    if any(mode != "ab" for mode in ran):
        timed = {m: r for m, r in results.items() if m != "ab"}
        text = section(timed, args.python, minutes)
        write_section(args.out, text, f"{SECTION}-{version}")
    if "ab" in ran:
        ab_text = section({"ab": results["ab"]}, args.python, minutes)
        write_section(args.out, ab_text, f"{SECTION}-ab-{version}")
        text += ab_text
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
