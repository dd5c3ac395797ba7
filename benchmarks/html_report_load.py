"""The HTML report's size and load time at 2,000 tests: writes its table into docs/reports.md.

    .venv/bin/python benchmarks/html_report_load.py [--tests 2000] [--runs 5]
        [--profile PROFILE.json --rootdir DIR]   # also measure a real run's page

The 2,000-test session is made up, shaped like a real `--profile --profile-compare` run: 60
source files of 400 lines; each test with 3 to 12 profiled lines with CPU and memory figures (a
timeline of 1 to 5 points each), its own memory timeline of 10 to 100 points and the five
verdicts a compared test gets; every test has a stored baseline (the page adds up their lines
for the suite's differential flame graph) and 1% of them fail their gate against it (the page
embeds their per-line diffs); ids of 60 to 160 characters; and the sampled call stacks the
plugin records for the page, 5 to 30 distinct stacks per test, pytest's frames, the test's and
up to 40 more down a call tree of 3,000 functions (synthetic_stacks). It is written with
html_report.write_html and opened in headless Chromium (Debian's chromium) at 1,400 x 900 px, a
fresh navigation per run: "load" is navigation start to the end of the load event (the page
parses its data and draws the overview inside it); the views are timed from the hash change to
two animation frames later.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the DevTools-pipe browser of the browser test
sys.path.insert(0, str(ROOT))

from test_html_report_browser import CHROMIUM, Browser  # noqa: E402

from pytest_scalene.core.model import LineKey, SessionProfile, TestProfile  # noqa: E402
from pytest_scalene.core.verdict import REGRESSION, Verdict  # noqa: E402
from pytest_scalene.gates import baseline_store  # noqa: E402
from pytest_scalene.gates.baseline_entry import entry_from_profile  # noqa: E402
from pytest_scalene.reports import html_report  # noqa: E402
from pytest_scalene.reports.shards import merge_profiles  # noqa: E402
from pytest_scalene.sampling.stack_recorder import StackRecorder  # noqa: E402

FILES, FILE_LINES = 60, 400
OUT = ROOT / "docs" / "reports.md"  # between these two markers
BEGIN, END = "<!-- html_report_load.py: begin -->", "<!-- html_report_load.py: end -->"


def synthetic_stacks(session: SessionProfile, seed: int = 27) -> StackRecorder:
    """Stacks as --profile-html records them (sampling/stack_recorder.py's payload), shaped like
    a program's: pytest's frames, the test's own, then a path down one call tree of 3,000
    functions (each called by the one before it, or 3 times in 10 by an earlier one)."""
    rng = random.Random(seed)
    frames = [
        [f"function_{f % FILES}_{f % 200}", f"pkg/module_{f % FILES}.py", 1 + f]
        for f in range(3000)
    ]
    parent = [-1] + [f - 1 if rng.random() < 0.7 else rng.randrange(f) for f in range(1, 3000)]
    pytest_frames = [len(frames) + i for i in range(6)]
    frames += [[f"pytest_frame_{i}", "_pytest/python.py", 100 + i] for i in range(6)]
    tests = {}
    for nodeid, profile in session.tests.items():
        own = len(frames)
        frames.append([nodeid.rsplit("::", 1)[-1], nodeid.split("::", 1)[0], 10])
        stacks = rng.randint(5, 30)
        paths = []
        for _ in range(stacks):
            node, path = rng.randrange(3000), []
            while node >= 0 and len(path) < 40:
                path.append(node)
                node = parent[node]
            paths.append([*pytest_frames, own, *reversed(path)])
        tests[nodeid] = [
            [path, n, n * profile.cpu_s / stacks / 3]
            for path, n in zip(paths, (rng.randint(1, 5) for _ in paths), strict=True)
        ]
    recorder = StackRecorder(scope=None)  # type: ignore[arg-type]  # merged into only
    recorder.merge_payload({"frames": frames, "tests": tests})
    return recorder


def synthetic_session(root: Path, count: int, seed: int = 26) -> SessionProfile:
    rng = random.Random(seed)
    src = root / "pkg"
    src.mkdir(parents=True, exist_ok=True)
    for f in range(FILES):
        body = [
            f"def function_{f}_{n}(x):\n    return x * {n} + sum(range(x))\n" for n in range(200)
        ]
        (src / f"module_{f}.py").write_text("".join(body))
    session = SessionProfile(interval_s=0.01, clock="cpu")
    stored: dict[str, dict[str, baseline_store.TestEntry]] = {}
    for i in range(count):
        module = f"tests/test_area_{i % 40}.py"
        nodeid = f"{module}::TestGroup{i % 7}::test_case_{i}[" + "p" * rng.randint(10, 110) + "]"
        test = TestProfile(nodeid, outcome="passed", elapsed_s=rng.lognormvariate(-4, 1.2))
        for _ in range(rng.randint(3, 12)):
            line = rng.randrange(1, FILE_LINES, 2) + 1
            file = f"pkg/module_{rng.randrange(FILES)}.py"
            stats = test.line(LineKey(file, line, f"function_{line // 2}"), line - 1)
            stats.cpu_python_s = rng.expovariate(200)
            stats.cpu_native_s = rng.expovariate(800)
            stats.samples = 1 + int(stats.cpu_s / 0.01)
            peak = rng.expovariate(1 / 3)
            points = sorted(rng.random() * test.elapsed_s for _ in range(rng.randint(1, 5)))
            stats.extra.update(
                peak_mb=round(peak, 6),
                alloc_mb=round(peak * 1.2, 6),
                python_alloc_fraction=round(rng.random(), 6),
                copy_mb_s=round(rng.expovariate(1 / 5), 6),
                timeline=[[round(t, 6), round(peak * rng.random(), 6)] for t in points],
            )
        test.cpu_python_s = sum(s.cpu_python_s for s in test.lines.values())
        test.cpu_native_s = sum(s.cpu_native_s for s in test.lines.values())
        peak = max(s.extra["peak_mb"] for s in test.lines.values())
        points = sorted(rng.random() * test.elapsed_s for _ in range(rng.randint(10, 100)))
        test.extra.update(
            peak_mb=peak,
            alloc_mb=round(peak * 1.3, 6),
            copy_mb=0.0,
            copy_mb_s=0.0,
            rss_mb=round(peak * 1.1, 6),
            timeline=[[0.0, 0.0]] + [[round(t, 6), round(peak * rng.random(), 6)] for t in points],
            leaks=[],
            held=[],
            retained=[],
        )
        # --profile-compare judges every test: five passed verdicts, as a real run writes them
        test.verdicts = [
            Verdict(REGRESSION, m, 1.0, 0.5, True, f"{m} 0.5 vs baseline 0.5 (+0%; fails above "
                    "+25% and +10.0 MB)", None, 0.5)
            for m in ("cpu_s", "peak_mb", "alloc_mb", "rss_mb", "copy_mb")
        ]  # fmt: skip
        # Every test has a stored baseline; 1% of them fail against it (half the CPU then).
        slower = 2.0 if i % 100 == 0 else rng.uniform(0.9, 1.1)
        before = TestProfile(nodeid, elapsed_s=test.elapsed_s)
        for key, stats in test.lines.items():
            old = before.line(key, stats.function_line)
            old.cpu_python_s, old.samples = stats.cpu_python_s / slower, stats.samples
        before.cpu_python_s = test.cpu_python_s / slower
        stored.setdefault(module, {})[nodeid] = entry_from_profile(before, str(root))
        path = baseline_store.path_for("baselines", module).as_posix()
        test.extra["baseline"] = {"file": path, "notes": []}
        if i % 100 == 0:
            cpu = round(test.cpu_s, 6)
            test.verdicts = [
                Verdict(
                    REGRESSION, "cpu_s", cpu * 0.9, cpu, False, "CPU time regressed", None, cpu / 2
                )
            ]
        session.tests[nodeid] = test
    for module, tests in stored.items():
        baseline_store.write(
            root / "baselines", baseline_store.ModuleBaseline(module, 0.01, "cpu", 1, tests)
        )
    return session


VIEWS = ("#source", "#flame", "#test/0")
TIMED_VIEW = (
    "(() => { const t0 = performance.now(); location.hash = HASH; return new Promise((r) =>"
    " requestAnimationFrame(() => requestAnimationFrame(() => r(performance.now() - t0)))); })()"
)


def measure(page: Path, runs: int) -> dict[str, object]:
    assert CHROMIUM is not None, "headless Chromium not found (apt-get install -y chromium)"
    loads: list[float] = []
    starts: list[float] = []  # navigation start to the page's script starting (HTML parsed)
    scripts: list[float] = []  # the script: data parsed, overview drawn
    layouts: list[float] = []  # the first layout of what it drew
    views: dict[str, list[float]] = {v: [] for v in VIEWS}
    fits = True
    with tempfile.TemporaryDirectory() as profile:
        browser = Browser(CHROMIUM, profile)
        try:
            version = browser.call("Browser.getVersion", session=None)["product"]
            for _ in range(runs):
                browser.open("about:blank")
                browser.open(page.as_uri(), width=1400, height=900)
                assert browser.exceptions() == [], browser.exceptions()
                entry = browser.evaluate(
                    "(() => { const n = performance.getEntriesByType('navigation')[0];"
                    " return n.loadEventEnd - n.startTime; })()"
                )
                loads.append(float(entry))
                marks = browser.evaluate("document.documentElement.dataset.scriptMs")
                begun, ran, laid = map(float, marks.split())
                starts.append(begun)
                scripts.append(ran)
                layouts.append(laid)
                for view in VIEWS:
                    views[view].append(
                        float(browser.evaluate(TIMED_VIEW.replace("HASH", json.dumps(view))))
                    )
                    fits = fits and browser.evaluate(
                        "[document.documentElement, ...document.querySelectorAll('.scroll')]"
                        ".every((e) => e.scrollWidth <= e.clientWidth)"
                    )
        finally:
            browser.close()
    return {
        "browser": version,
        "bytes": page.stat().st_size,
        "load_ms": statistics.median(loads),
        "load_max_ms": max(loads),
        "script_start_ms": statistics.median(starts),
        "script_ms": statistics.median(scripts),
        "layout_ms": statistics.median(layouts),
        "views_ms": {v: statistics.median(t) for v, t in views.items()},
        "fits_1400": fits,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--profile", help="a --profile-json file to measure too")
    parser.add_argument("--rootdir", help="its rootdir (for the source files)")
    parser.add_argument("--label", default="a real run")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        session = synthetic_session(root, args.tests)
        page = root / "report.html"
        written = time.perf_counter()
        html_report.write_html(session, page, str(root), stacks=synthetic_stacks(session))
        write_s = time.perf_counter() - written
        print(f"session built in {written - started:.1f} s, page written in {write_s:.2f} s")
        rows.append((f"{args.tests} tests (synthetic)", write_s, measure(page, args.runs)))
        if args.profile:
            real = merge_profiles([args.profile])
            page = root / "real.html"
            written = time.perf_counter()
            html_report.write_html(real, page, args.rootdir or ".")
            write_s = time.perf_counter() - written
            rows.append(
                (f"{len(real.tests)} tests ({args.label})", write_s, measure(page, args.runs))
            )
    lines = [
        "Written by `benchmarks/html_report_load.py` (its docstring says how the 2,000-test",
        "session is made). Headless Chromium at 1,400 x 900 px; medians of "
        f"{args.runs} fresh loads. `load`: navigation start to the end of the load event (the page",
        "parses its data and draws the overview in it); the views: from the hash change to two",
        "animation frames later; `fits`: no horizontal scrolling of the page or any table in it.",
        "`HTML parsed`: navigation start to the page's script starting; `script`: it parses the",
        "embedded data and draws the overview; `layout`: the browser lays that out; `written in`:",
        "html_report.write_html, most of it the profile's JSON (core/codec.py), which",
        "`--profile-json` pays too.",
        "",
        "| page | size | written in | load | slowest load | HTML parsed | script | layout "
        "| source view | suite flame graph | test view | fits 1,400 px |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, write_s, m in rows:
        v = m["views_ms"]
        lines.append(
            f"| {label} | {m['bytes'] / 1e6:.2f} MB | {write_s:.2f} s | {m['load_ms']:.0f} ms | "
            f"{m['load_max_ms']:.0f} ms | {m['script_start_ms']:.0f} ms | "
            f"{m['script_ms']:.0f} ms | "
            f"{m['layout_ms']:.0f} ms | {v['#source']:.0f} ms | {v['#flame']:.0f} ms | "
            f"{v['#test/0']:.0f} ms | {'yes' if m['fits_1400'] else 'NO'} |"
        )
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    lines += [
        "",
        f"Measured with {rows[0][2]['browser']} on {os.cpu_count()} CPUs shared with other work",
        f"(load average {load} at the end): the slowest load is the machine's noise more than the",
        "page's; the medians are what a reader waits.",
    ]
    doc = OUT.read_text(encoding="utf-8")
    head, found, rest = doc.partition(BEGIN)
    _, found_end, tail = rest.partition(END)
    if not (found and found_end):
        sys.exit(f"{OUT}: the markers {BEGIN} and {END} are missing")
    OUT.write_text(head + BEGIN + "\n" + "\n".join(lines) + "\n" + END + tail, encoding="utf-8")
    print("\n".join(lines))
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
