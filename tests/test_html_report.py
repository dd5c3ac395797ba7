"""The HTML report without a browser: the embedded JSON and the page's own data (source files,
baseline diffs, stacks), self-containment, the CSP, the plugin options.
tests/test_html_report_browser.py opens it in headless Chromium."""

from __future__ import annotations

import base64
import copy
import hashlib
import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from report_samples import sample_session, write_sources

from pytest_scalene.core import model
from pytest_scalene.core.codec import session_to_dict
from pytest_scalene.core.model import LineKey
from pytest_scalene.core.verdict import REGRESSION, Verdict
from pytest_scalene.gates import baseline_store
from pytest_scalene.gates.baseline_entry import entry_from_profile
from pytest_scalene.reports import html_data, html_report
from pytest_scalene.reports.speedscope import to_speedscope
from pytest_scalene.sampling.stack_recorder import StackRecorder

MATMUL = "tests/test_math.py::test_matmul[1500]"
MATH = "tests/test_math.py"
BLOCKS = {"profile-data", "source-data", "compare-data", "stack-data", ""}


def compared_session(root: Path) -> model.SessionProfile:
    """sample_session() with test_matmul failing its baseline: slow_sum's line 7 took 0.15 s in
    the saved baseline (0.55 s now) and its line 8 0.10 s (not sampled now: vanished)."""
    write_sources(root)
    session = sample_session()
    mat = session.tests[MATMUL]
    before = copy.deepcopy(mat)
    before.lines[LineKey(MATH, 7, "slow_sum")].cpu_python_s = 0.15
    before.line(LineKey(MATH, 8, "slow_sum"), function_line=1).cpu_python_s = 0.10
    before.cpu_python_s = 0.31
    stored = baseline_store.ModuleBaseline(
        MATH, 0.01, "cpu", 1, {MATMUL: entry_from_profile(before, str(root))}
    )
    baseline_store.write(root / "baselines", stored)
    mat.extra["baseline"] = {"file": "baselines/tests/test_math.py.json", "notes": []}
    mat.verdicts = [
        Verdict(
            REGRESSION,
            "cpu_s",
            7.5,
            7.64,
            False,
            "CPU time regressed: 7.64 s vs 7.34 s",
            "tests/test_math.py:7 slow_sum",
            7.34,
        )
    ]
    return session


def stack_recorder() -> StackRecorder:
    """Two stacks for test_matmul: test_matmul -> slow_sum (0.5 s), test_matmul alone (6.9 s)."""
    recorder = StackRecorder(scope=None)  # type: ignore[arg-type]
    recorder.merge_payload(
        {
            "frames": [["test_matmul", MATH, 11], ["slow_sum", MATH, 4]],
            "tests": {MATMUL: [[[0, 1], 50, 0.5], [[0], 690, 6.9]]},
        }
    )
    return recorder


def _blocks(page: str) -> dict[str, str]:
    """The text of each <script> element by id ("" for the unnamed executable one)."""

    class Scripts(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.found: dict[str, str] = {}
            self._id: str | None = None

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag == "script":
                self._id = dict(attrs).get("id") or ""
                self.found[self._id] = ""

        def handle_endtag(self, tag: str) -> None:
            if tag == "script":
                self._id = None

        def handle_data(self, data: str) -> None:
            if self._id is not None:
                self.found[self._id] += data

    parser = Scripts()
    parser.feed(page)
    return parser.found


def _page(tmp_path: Path, session: model.SessionProfile | None = None) -> str:
    write_sources(tmp_path)
    return html_report.render_html(session or sample_session(), str(tmp_path))


def test_embeds_exactly_the_profile_json(tmp_path: Path) -> None:
    session = sample_session()
    blocks = _blocks(_page(tmp_path, session))
    assert json.loads(blocks["profile-data"]) == json.loads(json.dumps(session_to_dict(session)))
    sources = json.loads(blocks["source-data"])
    # Whole files, line 1 first: the source view shows every line.
    assert sources["etl/load.py"][8] == "    cleaned = np.array(frame)  # a silent copy"
    assert len(sources["etl/load.py"]) == 19 and sources["etl/load.py"][0].startswith('"""')
    assert json.loads(blocks["compare-data"]) == {"tests": {}, "suite": {"tests": 0, "lines": []}}
    assert json.loads(blocks["stack-data"]) is None  # no stacks recorded


def test_a_long_file_keeps_only_the_lines_near_profiled_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(html_data, "MAX_FILE_LINES", 10)
    monkeypatch.setattr(html_data, "CONTEXT", 1)
    write_sources(tmp_path)
    lines = html_data.source_files(sample_session(), str(tmp_path))["etl/load.py"]
    assert len(lines) == 19  # etl/load.py's profiled lines: 7, 9, 10, 11, 16
    kept = [i + 1 for i, text in enumerate(lines) if text is not None]
    assert kept == [6, 7, 8, 9, 10, 11, 12, 15, 16, 17]


def test_failed_tests_embed_their_per_line_diff_against_the_baseline(tmp_path: Path) -> None:
    session = compared_session(tmp_path)
    found = json.loads(_blocks(html_report.render_html(session, str(tmp_path)))["compare-data"])
    diffs = found["tests"]
    assert set(diffs) == {MATMUL}  # only the failed test that has a baseline
    rows = {(file, line): (before, now) for file, line, _, before, now in diffs[MATMUL]["lines"]}
    assert rows[(MATH, 7)] == ({"cpu_s": 0.17}, {"cpu_s": 0.57})  # paired; 0.02 s native in both
    assert rows[(MATH, 8)] == ({"cpu_s": 0.1}, None)  # vanished
    assert rows[(MATH, 14)][0] == rows[(MATH, 14)][1]  # unchanged
    assert diffs[MATMUL]["metrics"]["cpu_s"] == pytest.approx(7.34)
    # The suite's: every compared test's CPU seconds per line, added up (one test here).
    suite = {(f, n): (b, c) for f, n, _, b, c in found["suite"]["lines"]}
    assert found["suite"]["tests"] == 1
    assert suite[(MATH, 7)] == (0.17, 0.57) and suite[(MATH, 8)] == (0.1, 0)


def test_the_suite_diff_adds_up_every_compared_test_passed_or_not(tmp_path: Path) -> None:
    session = compared_session(tmp_path)
    mat = session.tests[MATMUL]
    mat.verdicts = []  # passed: no per-line diff of its own, still in the suite's
    twin = copy.deepcopy(mat)  # a second compared test, against the same baseline entry
    twin.nodeid = MATMUL.replace("1500", "twin")
    session.tests[twin.nodeid] = twin
    stored = baseline_store.read(tmp_path / "baselines" / "tests" / "test_math.py.json")
    entry = stored.tests[MATMUL]
    baseline_store.write(
        tmp_path / "baselines",
        baseline_store.ModuleBaseline(MATH, 0.01, "cpu", 1, {MATMUL: entry, twin.nodeid: entry}),
    )
    found = html_data.baseline_diffs(session, str(tmp_path))
    assert found["tests"] == {}
    suite = {(f, n): (b, c) for f, n, _, b, c in found["suite"]["lines"]}
    assert found["suite"]["tests"] == 2
    assert suite[(MATH, 7)] == (pytest.approx(0.34), pytest.approx(1.14))


def test_a_missing_or_broken_baseline_file_leaves_the_diff_out(tmp_path: Path) -> None:
    session = compared_session(tmp_path)
    (tmp_path / "baselines" / "tests" / "test_math.py.json").write_text("{broken")
    nothing = {"tests": {}, "suite": {"tests": 0, "lines": []}}
    assert html_data.baseline_diffs(session, str(tmp_path)) == nothing
    session.tests[MATMUL].extra["baseline"] = {"file": "baselines/nowhere.json"}
    assert html_data.baseline_diffs(session, str(tmp_path)) == nothing


def test_stacks_are_embedded_weighted_as_speedscope_weighs_them(tmp_path: Path) -> None:
    write_sources(tmp_path)
    session, recorder = sample_session(), stack_recorder()
    found = json.loads(
        _blocks(html_report.render_html(session, str(tmp_path), stacks=recorder))["stack-data"]
    )
    assert found["frames"] == [["test_matmul", MATH, 11], ["slow_sum", MATH, 4]]
    assert found["tests"] == {MATMUL: [[[0, 1], 0.5], [[0], 6.9]]}
    session.clock = "wall"  # samples x interval, as the speedscope export
    assert html_data.stack_data(session, recorder)["tests"][MATMUL][1] == [[0], 6.9]


def test_a_speedscope_file_gives_back_the_same_stacks() -> None:
    session, recorder = sample_session(), stack_recorder()
    again = html_data.recorder_from_speedscope(to_speedscope(session, recorder), 0.01)
    assert again.frames == recorder.frames
    found, expected = again.tests[MATMUL].stacks, recorder.tests[MATMUL].stacks
    assert found.keys() == expected.keys()
    assert [(c.samples, c.cpu_s) for c in map(found.get, expected)] == [
        (c.samples, c.cpu_s) for c in expected.values()
    ]


def test_hostile_text_cannot_break_out_of_the_data_block(tmp_path: Path) -> None:
    session = sample_session()
    nodeid = "tests/t.py::test_x[</script><script>alert(1)</script><!--{{CSP}}&amp;]"
    session.tests[nodeid] = model.TestProfile(nodeid, outcome="passed")
    (tmp_path / "evil.py").write_text("s = '</script><!-- {{PROFILE_JSON}}'\n")
    session.tests[nodeid].line(LineKey("evil.py", 1, "f")).cpu_python_s = 0.5
    page = _page(tmp_path, session)
    blocks = _blocks(page)
    # Still five scripts, and the data parses back to the original strings.
    assert set(blocks) == BLOCKS
    assert nodeid in json.loads(blocks["profile-data"])["tests"]
    assert json.loads(blocks["source-data"])["evil.py"] == ["s = '</script><!-- {{PROFILE_JSON}}'"]
    assert page.count("</script>") == 5


def test_embed_json_round_trips() -> None:
    data = {"a": "</script>", "b": "<!--", "c": "&<>\u2028", "d": [1.5, None, True]}
    text = html_report.embed_json(data)
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == data


def test_the_page_is_self_contained(tmp_path: Path) -> None:
    page = _page(tmp_path)
    # Nothing that would load a resource: no src, no stylesheet link, no CSS url() or @import.
    assert not re.search(r"\bsrc\s*=", page, re.IGNORECASE)
    assert not re.search(r"<link\b", page, re.IGNORECASE)
    assert not re.search(r"url\(|@import", page, re.IGNORECASE)
    # The only absolute URL is the SVG namespace name, which is never fetched.
    urls = set(re.findall(r"[a-z]+://[^\s\"'<>)]+", page))
    assert urls <= {"http://www.w3.org/2000/svg"}, urls


def test_csp_allows_only_the_inline_script_by_hash(tmp_path: Path) -> None:
    page = _page(tmp_path)
    found = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    csp = html.unescape(found.group(1))
    script = _blocks(page)[""]
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in csp
    assert "default-src 'none'" in csp and "unsafe-eval" not in csp


def test_template_ships_as_package_data() -> None:
    from importlib import resources

    template = resources.files("pytest_scalene.reports").joinpath(html_report.TEMPLATE)
    assert template.is_file() and "{{PROFILE_JSON}}" in template.read_text(encoding="utf-8")


def test_empty_session_renders(tmp_path: Path) -> None:
    page = html_report.render_html(
        model.SessionProfile(interval_s=0.01, clock="cpu"), str(tmp_path)
    )
    assert json.loads(_blocks(page)["profile-data"])["tests"] == {}


def test_write_html_is_atomic_and_complete(tmp_path: Path) -> None:
    write_sources(tmp_path)
    out = tmp_path / "sub" / "report.html"
    html_report.write_html(sample_session(), out, str(tmp_path))
    assert out.read_text(encoding="utf-8").rstrip().endswith("</html>")
    assert [p.name for p in out.parent.iterdir()] == ["report.html"]  # no temporary left over


WORKLOAD = """
def test_spin():
    total = 0
    for i in range(1_000_000):
        total += i % 7
    assert total > 0
"""


@pytest.mark.slow
def test_plugin_writes_the_html_report(run_profiled, pytester: pytest.Pytester) -> None:
    out = pytester.path / "report.html"
    result, profile = run_profiled(WORKLOAD, f"--profile-html={out}")
    assert result.ret == 0, result.stdout.str()
    blocks = _blocks(out.read_text(encoding="utf-8"))
    assert json.loads(blocks["profile-data"]) == profile  # the same JSON as --profile-json
    sources = json.loads(blocks["source-data"])["test_workload.py"]
    assert "total += i % 7" in [text.strip() for text in sources]
    # the flame graphs are drawn from the sampled stacks, which the plugin records for the page
    stacks = json.loads(blocks["stack-data"])
    assert stacks is not None, "no stacks: the page would draw its flame graphs from lines"
    names = {frame[0] for frame in stacks["frames"]}
    assert any("test_spin" in name for name in names), names
    (spin,) = stacks["tests"].values()
    assert sum(seconds for _frames, seconds in spin) > 0.01, spin


@pytest.mark.slow
def test_unwritable_path_is_a_clear_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_ok():\n    pass\n")
    blocker = pytester.path / "not_a_dir"
    blocker.write_text("")
    result = pytester.runpytest_subprocess(
        "--profile", f"--profile-html={blocker / 'report.html'}", "-p", "no:cacheprovider"
    )
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    result.stdout.fnmatch_lines(["pytest-scalene: cannot write --profile-html file *not_a_dir*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_a_directory_is_refused_as_the_output_path(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--profile-html", str(pytester.path))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--profile-html: expected a file path*directory*"])
