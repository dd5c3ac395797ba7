"""Regenerates the screenshots in docs/img/ for docs/reports.md.

    .venv/bin/python docs/make_screenshots.py [--only-html]
        [--real-suite DIR [--python PYTHON]]

--real-suite: the unpacked sdist of sqlparse 0.5.3 (`pip download --no-binary :all: --no-deps
sqlparse==0.5.3`, then unpack it), whose tests are run with PYTHON (default: this one; it needs
pytest, and gets this checkout on its PYTHONPATH) in a copy: a baseline is saved, a slowdown is
put into ReindentFilter._process_values (one line calls token_next_by 15,000 times), and the
suite is compared with its baseline: one test fails its CPU-time gate. The pictures of that
page, at 1,400 px: the overview with the failed gate (html-report-gate.png), the source view of
the failed test's hottest file (html-report-source.png) and its differential flame graph
(html-report-diff-flame.png), and the suite's flame graphs (html-report-flame.png). --only-html:
leave the terminal picture alone.

Runs `pytest --profile -v` on examples/ at 100 columns, saves its HTML report
and a picture of its terminal report (the text drawn in a terminal-like page), and a picture of
the HTML report of the hand-made session in tests/report_samples.py (fake figures that exercise
every feature: memory, GPU, budgets, leaks). Needs headless Chromium (Debian's chromium package).
"""

from __future__ import annotations

import argparse
import base64
import html
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IMG = ROOT / "docs" / "img"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]


def screenshot(page: Path, png: Path, width: int, height: int) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("chromium not found: apt-get install -y chromium")
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [
                chromium,
                *FLAGS,
                f"--user-data-dir={profile}",
                f"--window-size={width},{height}",
                f"--screenshot={png}",
                page.as_uri(),
            ],
            check=True,
            capture_output=True,
        )
    print(f"wrote {png.relative_to(ROOT)}")


def terminal_page(text: str) -> str:
    return (
        "<!DOCTYPE html><meta charset='utf-8'><style>"
        "body{margin:0;background:#1e2127;}"
        "pre{margin:0;padding:14px 16px;color:#d7dae0;"
        "font:13px/1.35 'DejaVu Sans Mono',monospace;}"
        "</style><pre>" + html.escape(text) + "</pre>"
    )


SLOW_LINE = "        tidx, token = tlist.token_next_by(i=sql.Parenthesis)\n"
SLOWED = (
    "        tidx, token = [tlist.token_next_by(i=sql.Parenthesis) for _ in range(15000)][-1]\n"
)


def real_suite(suite: Path, python: str) -> None:
    """The sqlparse pictures: a failed gate, the source view and the differential flame graph."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "sqlparse"
        skip = shutil.ignore_patterns("baselines", "__pycache__", ".pytest_cache")
        shutil.copytree(suite, work, ignore=skip)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        page, data = work / "report.html", work / "profile.json"

        def pytest(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--profile",
                 "--profile-interval=0.001", *args, "tests"],
                cwd=work, env=env, capture_output=True, text=True,
            )  # fmt: skip

        saved = pytest("--profile-save-baseline")
        if saved.returncode != 0:
            sys.exit(f"saving the baseline failed:\n{saved.stdout[-3000:]}{saved.stderr[-3000:]}")
        target = work / "sqlparse" / "filters" / "reindent.py"
        text = target.read_text(encoding="utf-8")
        if text.count(SLOW_LINE) != 1:
            sys.exit(f"{target}: not sqlparse 0.5.3 (the line to slow down is not there once)")
        target.write_text(text.replace(SLOW_LINE, SLOWED), encoding="utf-8")
        pytest("--profile-compare", f"--profile-html={page}", f"--profile-json={data}")
        tests = json.loads(data.read_text(encoding="utf-8"))["tests"]
        failed = [
            n for n, t in tests.items() if any(not v["passed"] for v in t.get("verdicts", []))
        ]
        if not failed:
            sys.exit("no test failed its gate: the slowdown was not caught")
        index = list(tests).index(failed[0])
        hottest = max(
            tests[failed[0]]["lines"],
            key=lambda ln: ln["cpu_python_s"] + ln["cpu_native_s"] + ln["cpu_system_s"],
        )
        source = f"#source/{hottest['file'].replace('/', '%2F')}/{hottest['line']}/{index}"
        views(
            page,
            {
                "#overview": IMG / "html-report-gate.png",
                source: IMG / "html-report-source.png",
                f"#test/{index}/flame-diff-title": IMG / "html-report-diff-flame.png",
                "#flame": IMG / "html-report-flame.png",
            },
        )


def views(page: Path, shots: dict[str, Path]) -> None:
    """Pictures of views of a page (by URL hash), 1,400 x 900 px, through the browser test's
    DevTools-pipe driver."""
    sys.path.insert(0, str(ROOT / "tests"))
    from test_html_report_browser import CHROMIUM, Browser

    if CHROMIUM is None:
        sys.exit("chromium not found: apt-get install -y chromium")
    with tempfile.TemporaryDirectory() as profile:
        browser = Browser(CHROMIUM, profile)
        try:
            browser.open(page.as_uri(), width=1400, height=900)
            for view, png in shots.items():
                browser.evaluate(
                    f"location.hash = {json.dumps(view)}; new Promise((r) => requestAnimationFrame("
                    "() => requestAnimationFrame(() => requestAnimationFrame(r))))"
                )
                if browser.exceptions():
                    sys.exit(f"{view}: {browser.exceptions()}")
                shot = browser.call("Page.captureScreenshot", {"format": "png"})
                png.write_bytes(base64.b64decode(shot["data"]))
                print(f"wrote {png.relative_to(ROOT)}")
        finally:
            browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only-html", action="store_true", help="not the terminal picture")
    parser.add_argument("--real-suite", type=Path, help="sqlparse 0.5.3's unpacked sdist")
    parser.add_argument("--python", default=sys.executable, help="runs the real suite's tests")
    args = parser.parse_args()
    IMG.mkdir(parents=True, exist_ok=True)
    if args.real_suite:
        real_suite(args.real_suite.resolve(), args.python)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for source in (ROOT / "examples").glob("test_*.py"):
            shutil.copy(source, work / source.name)
        report = work / "report.html"
        env = {**os.environ, "COLUMNS": "100"}
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "--profile", "-v",
             f"--profile-html={report}", "-p", "no:cacheprovider"],
            cwd=work, env=env, capture_output=True, text=True,
        )  # fmt: skip
        lines = run.stdout.splitlines()
        start = next(i for i, ln in enumerate(lines) if "pytest-scalene profile" in ln)
        text = "\n".join(lines[start:])
        (work / "terminal.html").write_text(terminal_page(text), encoding="utf-8")
        rows = text.count("\n") + 1
        if not args.only_html:
            screenshot(work / "terminal.html", IMG / "terminal-report.png", 860, 28 + 18 * rows)
        screenshot(report, IMG / "html-report-examples.png", 1400, 1500)

        sys.path.insert(0, str(ROOT / "tests"))
        from report_samples import sample_session, write_sources

        from pytest_scalene.reports.html_report import write_html

        write_sources(work)
        sample = work / "sample.html"
        write_html(sample_session(), sample, str(work))
        screenshot(sample, IMG / "html-report.png", 1400, 1500)


if __name__ == "__main__":
    main()
