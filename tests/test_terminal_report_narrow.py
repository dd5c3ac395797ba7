"""The terminal report at 80 columns (issue 26): long test ids are cut in the middle, every
figure keeps its row, and lines wrap between phrases, never inside a figure."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
from report_samples import sample_session, write_sources

from pytest_scalene.core.model import LineKey, SessionProfile
from pytest_scalene.core.verdict import Verdict
from pytest_scalene.reports import terminal_report
from pytest_scalene.reports.terminal_summary import render_summary, unjudged_lines
from pytest_scalene.reports.text import (
    display_width,
    shorten_id,
    terminal_width,
    wrap,
)

DEEP = "tests/integration/very/deeply/nested/package_with_a_long_name"
LONG_FILE = f"{DEEP}/test_long_identifiers_of_the_pipeline.py"
DATASETS = ("customers_in_the_northern_hemisphere_2024_q1", "orders_shipped_with_gift_wrap")
NAME = "test_processing_pipeline_handles_a_realistic_workload_end_to_end"
LONG_IDS = [f"{LONG_FILE}::{NAME}[{size}-{d}]" for size in (200000, 300000) for d in DATASETS]


def _long_session(root: Path) -> SessionProfile:
    """The sample session plus four tests with long parametrized ids in a deep directory, each
    a copy of the sample's test_load_frame (every line column) with its own CPU time, and a
    failed budget whose message names a long path."""
    write_sources(root)
    (root / DEEP).mkdir(parents=True)
    (root / LONG_FILE).write_text("def work(n):\n    return sum(i * i for i in range(n))\n")
    session = sample_session()
    etl = session.tests["tests/test_etl.py::test_load_frame"]
    for rank, nodeid in enumerate(LONG_IDS):
        test = copy.deepcopy(etl)
        test.nodeid = nodeid
        test.cpu_python_s = 20.0 + rank  # the costliest tests, in a known order
        test.cpu_native_s = test.cpu_system_s = 0.0
        test.line(LineKey(LONG_FILE, 2, "work"), function_line=1).cpu_python_s = 20.0 + rank
        session.tests[nodeid] = test
    # Every column there is, on one test: its line table is the widest.
    widest = session.tests[LONG_IDS[1]].lines[LineKey("etl/load.py", 7, "load_frame")]
    widest.extra.update(wait_s=0.5, gpu_util_percent=50.0, gpu_peak_mb=100.0)
    session.tests[LONG_IDS[0]].verdicts = [
        *session.tests[LONG_IDS[0]].verdicts,
        Verdict.from_dict(
            {
                "metric": "cpu_s",
                "limit": 1.0,
                "value": 20.0,
                "passed": False,
                "message": f"CPU time 20.0 s > budget 1.00 s ({LONG_FILE}:2 work: 20.0 s)",
            }
        ),
    ]
    return session


def _section(text: str, title: str) -> list[str]:
    """The rows under `title`: its indented lines."""
    rows = text.split(f"\n{title}\n")[1].splitlines()
    return rows[: next((i for i, r in enumerate(rows) if not r.startswith(" ")), len(rows))]


def _figure_rows(text: str) -> list[str]:
    """Each source row of the line tables up to its last figure column: up to where its
    table's header reads "memory" or "source"."""
    out: list[str] = []
    end = 0
    for row in text.splitlines():
        if row.startswith("  line "):
            end = min(i for i in (row.find(" memory"), row.find(" source"), len(row)) if i > 0)
        elif re.match(r"^ {3,}\d+( |$)", row):
            out.append(row[:end].rstrip())
    return out


def _too_wide(text: str, width: int) -> list[str]:
    """Lines over `width` columns, but for a line table's rows where its figures alone take
    more (at 60 columns, every column there is): there the source text is left out, and no
    figure."""
    lines = text.splitlines()
    allowed: set[int] = set()
    for index, row in enumerate(lines):
        if row.startswith("  line "):
            end = min(i for i in (row.find(" memory"), row.find(" source"), len(row)) if i > 0)
            table = range(
                index - 1, next((j for j in range(index, len(lines)) if not lines[j]), len(lines))
            )
            allowed |= {j for j in table if display_width(lines[j]) <= end}
    return [ln for i, ln in enumerate(lines) if display_width(ln) > width and i not in allowed]


@pytest.mark.parametrize("width", [80, 100])
def test_summary_rows_keep_their_figures_and_fit(tmp_path: Path, width: int) -> None:
    text = render_summary(_long_session(tmp_path), str(tmp_path), width)
    assert not _too_wide(text, width), _too_wide(text, width)
    top = _section(text, "Top tests by CPU:")
    # Each row: its CPU time first, then the test id cut in its middle, tests told apart.
    figures = [re.match(r"^ +(\d+\.\d+ s) {3}\S", row) for row in top]
    assert [m.group(1) if m else row for m, row in zip(figures, top, strict=True)] == [
        "23.00 s",
        "22.00 s",
        "21.00 s",
        "20.00 s",
        "7.64 s",
    ]
    assert len(set(top)) == len(top)
    for row, nodeid in zip(top, reversed(LONG_IDS), strict=False):
        assert "…" in row, row
        assert row.endswith(nodeid[-9:]), row  # the parameters' end
        assert "[300000-" in row or "[200000-" in row, row  # and their start
    peaks = _section(text, "Top tests by peak memory:")
    assert all(re.match(r"^ +312\.4 MB {3}\S", row) for row in peaks), peaks
    lines = "\n".join(_section(text, "Top lines by CPU (all tests):"))
    assert re.search(r"^ +86\.00 s +\d+% +\S*…\S*\.py:2 \(4 tests\) ", lines, re.M), lines


@pytest.mark.parametrize("width", [60, 80])
def test_detailed_report_keeps_every_figure(tmp_path: Path, width: int) -> None:
    session = _long_session(tmp_path)
    text = terminal_report.render(session, str(tmp_path), width=width)
    assert not _too_wide(text, width), _too_wide(text, width)
    wide = terminal_report.render(session, str(tmp_path), width=200)  # nothing cut: the reference
    narrow_rows, wide_rows = _figure_rows(text), _figure_rows(wide)
    assert len(narrow_rows) == len(wide_rows) > 20
    # The line number and every figure, whole and in place; only the source text gives way.
    assert narrow_rows == wide_rows
    headers = [r for r in text.splitlines() if r.endswith(("[passed]", "[failed]"))]
    assert sum("…" in h for h in headers) == len(LONG_IDS)
    assert all(h.startswith("tests") for h in headers), headers


def test_summary_and_notes_wrap_between_phrases(tmp_path: Path) -> None:
    session = _long_session(tmp_path)
    text = render_summary(session, str(tmp_path), 80)
    first = text.split("\n\n")[0].splitlines()
    assert first[0].startswith("7 tests profiled  time ")
    for phrase in ("highest peak 312.4 MB", "budgets 6 failed of 11", "5 likely leaks"):
        assert sum(phrase in line for line in first) == 1, first  # on one row, whole
    failed = "\n".join(_section(text, "Failed gates:"))
    assert "work: 20.0 s)" in failed  # the figure stays with its label
    lines = text.splitlines()
    for phrase in ("Per test details: -v;", "all figures: --profile-json, --profile-html."):
        assert sum(phrase in line for line in lines) == 1, text  # a phrase is never cut


def test_wrap_never_breaks_inside_a_figure() -> None:
    text = (
        "cpu 0.09 s (python 100% native 0% system 0%)  highest peak 312.4 MB  budgets 1 failed of 1"
    )
    for width in range(30, 100):
        lines = wrap(text, width, "", "  ")
        assert all(display_width(line) <= width for line in lines), (width, lines)
        joined = "\n".join(lines)
        for figure in ("cpu 0.09 s", "peak 312.4 MB", "of 1", "python 100%"):
            assert figure in joined, (width, lines)
        for line, after in zip(lines, lines[1:], strict=False):  # no figure led off its row
            assert not re.match(r" *(\d|(s|MB|%)\b)", after), (width, line, after)
        # A phrase that fits a line is never split over two.
        assert "highest peak 312.4 MB" in joined or width < 21


def test_wrap_cuts_a_word_too_long_for_a_line_in_its_middle() -> None:
    lines = wrap(f"regressed at {LONG_FILE}:2 work", 60, "  ", "    ")
    assert all(display_width(line) <= 60 for line in lines), lines
    path = next(line for line in lines if "…" in line).strip()
    assert path.startswith("tests/") and path.endswith("_pipeline.py:2 work"), (
        path
    )  # with its function


def test_shorten_id_keeps_the_parts_that_tell_tests_apart() -> None:
    for width in (30, 50, 65, 80):
        cut = [shorten_id(n, width) for n in LONG_IDS]
        assert all(display_width(c) <= width for c in cut)
        assert len(set(cut)) == len(cut), cut
        assert all("::test_" in c for c in cut), cut
    assert shorten_id("tests/test_a.py::test_b[1]", 80) == "tests/test_a.py::test_b[1]"


def test_unjudged_lines_wrap_at_their_phrases() -> None:
    lines = unjudged_lines(
        [{"gate": "the A/B comparison (--profile-compare-ref)", "tests": 65, "fails": True}],
        7,
        False,
        "--profile-allow-unjudged",
        width=80,
    )
    assert all(display_width(line) <= 80 for line in lines), lines
    assert any(
        line.strip() == "--profile-allow-unjudged (ini: profile_allow_unjudged = true)"
        for line in lines
    ), lines


class _Writer:
    def __init__(self, fullwidth: int) -> None:
        self.fullwidth = fullwidth


class _Config:
    def __init__(self, fullwidth: int) -> None:
        self.writer = _Writer(fullwidth)

    def get_terminal_writer(self) -> _Writer:
        return self.writer


def test_terminal_width_follows_pytest_within_bounds() -> None:
    assert terminal_width(_Config(80)) == 80
    assert terminal_width(_Config(240)) == 100
    assert terminal_width(_Config(20)) == 60
    assert terminal_width(object()) == 100


LONG_SUITE = """
import pytest

def work(n):
    return sum(i * i for i in range(n))

@pytest.mark.parametrize("dataset", ["customers_in_the_northern_hemisphere", "orders_gift_wrap"])
@pytest.mark.parametrize("size", [300_000, 400_000])
def test_processing_pipeline_handles_a_realistic_workload_end_to_end(size, dataset):
    assert work(size) > 0
"""


@pytest.mark.parametrize("details", [False, True])
def test_a_real_run_at_80_columns(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, details: bool
) -> None:
    (pytester.path / DEEP).mkdir(parents=True)
    (pytester.path / LONG_FILE).write_text(LONG_SUITE)
    monkeypatch.setenv("COLUMNS", "80")
    args = ["--profile", "--profile-memory=no", "-p", "no:cacheprovider"]
    result = pytester.runpytest_subprocess(*args, *(["-v"] if details else []))
    assert result.ret == 0, result.stdout.str()
    lines = result.stdout.lines
    start = next(i for i, ln in enumerate(lines) if "pytest-scalene profile" in ln)
    report = lines[start + 1 :]
    assert not [ln for ln in report if display_width(ln) > 80], "\n".join(report)
    if details:
        headers = [ln for ln in report if ln.endswith("[passed]")]
        assert len(headers) == 4 and all("…" in h for h in headers), report
    else:
        top = _section("\n".join(report), "Top tests by CPU:")
        assert top and all(re.match(r"^ +\d+(\.\d+)? m?s {3}tests/", row) for row in top), top


def test_wrap_keeps_source_text_in_backticks_whole() -> None:
    message = "CPU time regressed at mylib.py:9 crunch `total += i * i % 7`: 0.40 s vs 0.02 s"
    for width in range(60, 101):  # the report's widths
        lines = wrap(message, width, "    ", "      ")
        assert sum("`total += i * i % 7`" in line for line in lines) == 1, (width, lines)
