"""The HTML report without a browser: the embedded JSON, self-containment, the CSP, the plugin
options. tests/test_html_report_browser.py opens it in headless Chromium."""

from __future__ import annotations

import base64
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
from pytest_scalene.reports import html_report


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
    assert sources["etl/load.py"]["9"] == "    cleaned = np.array(frame)  # a silent copy"


def test_hostile_text_cannot_break_out_of_the_data_block(tmp_path: Path) -> None:
    session = sample_session()
    nodeid = "tests/t.py::test_x[</script><script>alert(1)</script><!--{{CSP}}&amp;]"
    session.tests[nodeid] = model.TestProfile(nodeid, outcome="passed")
    (tmp_path / "evil.py").write_text("s = '</script><!-- {{PROFILE_JSON}}'\n")
    session.tests[nodeid].line(LineKey("evil.py", 1, "f")).cpu_python_s = 0.5
    page = _page(tmp_path, session)
    blocks = _blocks(page)
    # Still three scripts, and the data parses back to the original strings.
    assert set(blocks) == {"profile-data", "source-data", ""}
    assert nodeid in json.loads(blocks["profile-data"])["tests"]
    assert (
        json.loads(blocks["source-data"])["evil.py"]["1"] == "s = '</script><!-- {{PROFILE_JSON}}'"
    )
    assert page.count("</script>") == 3


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
    sources = json.loads(blocks["source-data"])["test_workload.py"].values()
    assert "total += i % 7" in [text.strip() for text in sources]


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
