"""Regenerates the screenshots in docs/img/ for docs/reports.md.

    .venv/bin/python docs/make_screenshots.py

Runs `pytest --profile --profile-details` on examples/ at 100 columns, saves its HTML report
and a picture of its terminal report (the text drawn in a terminal-like page), and a picture of
the HTML report of the hand-made session in tests/report_samples.py (fake figures that exercise
every feature: memory, GPU, budgets, leaks). Needs headless Chromium (Debian's chromium package).
"""

from __future__ import annotations

import html
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


def main() -> None:
    IMG.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for source in (ROOT / "examples").glob("test_*.py"):
            shutil.copy(source, work / source.name)
        report = work / "report.html"
        env = {**os.environ, "COLUMNS": "100"}
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "--profile", "--profile-details",
             f"--profile-html={report}", "-p", "no:cacheprovider", "-q"],
            cwd=work, env=env, capture_output=True, text=True,
        )  # fmt: skip
        lines = run.stdout.splitlines()
        start = next(i for i, ln in enumerate(lines) if "pytest-scalene profile" in ln)
        text = "\n".join(lines[start:])
        (work / "terminal.html").write_text(terminal_page(text), encoding="utf-8")
        rows = text.count("\n") + 1
        screenshot(work / "terminal.html", IMG / "terminal-report.png", 860, 28 + 18 * rows)
        screenshot(report, IMG / "html-report-examples.png", 1280, 1500)

        sys.path.insert(0, str(ROOT / "tests"))
        from report_samples import sample_session, write_sources

        from pytest_scalene.reports.html_report import write_html

        write_sources(work)
        sample = work / "sample.html"
        write_html(sample_session(), sample, str(work))
        screenshot(sample, IMG / "html-report.png", 1280, 1700)


if __name__ == "__main__":
    main()
