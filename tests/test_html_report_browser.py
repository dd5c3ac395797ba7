"""The HTML report in a real browser: headless Chromium, driven over the DevTools protocol.

The protocol runs over a pipe (--remote-debugging-pipe: JSON messages, each ended by a NUL byte,
read from fd 3 and written to fd 4), so no websocket client, driver or extra package is needed.

No network request, asserted two ways:
- Network.requestWillBeSent reports every request the page starts, the document's own included,
  and also those its Content-Security-Policy then blocks (they end in Network.loadingFailed with
  blockedReason "csp"). The only one allowed is the report's own file:// URL.
- A listener installed before the page's scripts run records every `securitypolicyviolation`,
  so an attempt that the CSP stopped is a failure too, whatever kind of load it was.
Both detectors are shown to fire on control pages that do reach out.

Skipped, saying why, where Chromium is not installed (.ci/run installs Debian's chromium).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from report_samples import sample_session, write_sources
from test_html_report import MATH, MATMUL, _blocks, compared_session, stack_recorder

from pytest_scalene.core.codec import session_to_dict
from pytest_scalene.core.model import TestProfile
from pytest_scalene.core.verdict import REGRESSION, Verdict
from pytest_scalene.reports import html_report


def _chromium() -> str | None:
    override = os.environ.get("PYTEST_SCALENE_CHROMIUM")
    if override:
        return override
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


CHROMIUM = _chromium()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="headless Chromium not found: install Debian's chromium package "
        "(apt-get install -y chromium; .ci/run does) or set PYTEST_SCALENE_CHROMIUM",
    ),
]

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-pipe",
]
TIMEOUT_S = 30.0
RECORD_CSP_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation",
  (e) => window.__cspViolations.push(e.violatedDirective + " " + e.blockedURI));
"""


class Browser:
    """A headless Chromium and one page, driven by DevTools protocol messages over a pipe."""

    def __init__(self, executable: str, profile_dir: str) -> None:
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # bash puts the pipe ends on fds 3 and 4, where Chromium expects them (dash cannot:
        # it takes one-digit fds only).
        script = f'exec "$@" 3<&{to_browser_r} 4>&{from_browser_w}'
        self.proc = subprocess.Popen(
            ["bash", "-c", script, "bash", executable, *FLAGS, f"--user-data-dir={profile_dir}"],
            pass_fds=(to_browser_r, from_browser_w),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its helper processes go with it (close kills the group)
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        try:
            target = self.call("Target.createTarget", {"url": "about:blank"}, session=None)
            attached = self.call(
                "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}, None
            )
        except BaseException:  # no browser left behind when the start fails (a slow machine)
            self.close()
            raise
        self.session: str | None = attached["sessionId"]

    def _read(self) -> None:
        buffer = b""
        with os.fdopen(self._from_browser, "rb", buffering=0) as pipe:
            while chunk := pipe.read(65536):
                buffer += chunk
                *messages, buffer = buffer.split(b"\0")
                for message in messages:
                    self._messages.put(json.loads(message))
        self._messages.put(None)  # the browser went away

    def call(self, method: str, params: dict | None = None, session: str | None = "") -> Any:
        """Send a command (to the page's session unless `session` is given) and wait for its
        result; events that arrive meanwhile are kept in `self.events`."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        target = self.session if session == "" else session
        if target:
            message["sessionId"] = target
        try:
            os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        except BrokenPipeError:
            raise RuntimeError(f"Chromium exited: {self._stderr_tail()}") from None
        while True:
            reply = self._get()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def _get(self) -> dict[str, Any]:
        try:
            reply = self._messages.get(timeout=TIMEOUT_S)
        except queue.Empty:
            raise TimeoutError("Chromium did not answer") from None
        if reply is None:
            raise RuntimeError(f"Chromium exited: {self._stderr_tail()}")
        return reply

    def _stderr_tail(self) -> str:
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return "(still running)"
        return f"exit status {self.proc.returncode}: " + self.proc.stderr.read().decode()[-2000:]

    def wait_for_event(self, method: str) -> dict[str, Any]:
        for event in self.events:
            if event["method"] == method:
                self.events.remove(event)
                return event
        while True:
            reply = self._get()
            if reply.get("method") == method:
                return reply
            if "method" in reply:
                self.events.append(reply)

    def open(self, url: str, width: int = 1280, height: int = 1000) -> None:
        for domain in ("Network", "Page", "Runtime"):
            self.call(f"{domain}.enable")
        self.call("Page.addScriptToEvaluateOnNewDocument", {"source": RECORD_CSP_VIOLATIONS})
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )
        self.events.clear()
        self.call("Page.navigate", {"url": url})
        self.wait_for_event("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        result = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def click(self, selector: str) -> None:
        """A real mouse click (pressed and released) at the middle of the element."""
        box = self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
            " return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        for kind in ("mousePressed", "mouseReleased"):
            self.call(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": box[0], "y": box[1], "button": "left", "clickCount": 1},
            )

    def screenshot(self, path: Path) -> None:
        self.evaluate("window.scrollTo(0, 0)")
        height = min(6000, int(self.evaluate("document.documentElement.scrollHeight")))
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": 1280, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )
        shot = self.call("Page.captureScreenshot", {"format": "png"})
        path.write_bytes(base64.b64decode(shot["data"]))

    def requested_urls(self) -> list[str]:
        return [
            e["params"]["request"]["url"]
            for e in self.events
            if e["method"] == "Network.requestWillBeSent"
        ]

    def exceptions(self) -> list[str]:
        return [
            json.dumps(e["params"]["exceptionDetails"])
            for e in self.events
            if e["method"] == "Runtime.exceptionThrown"
        ]

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):
            self.call("Browser.close", session=None)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # renderers and zygotes it left
        os.close(self._to_browser)


@pytest.fixture(scope="module")
def browser():
    assert CHROMIUM is not None
    with tempfile.TemporaryDirectory(prefix="pytest-scalene-chromium-") as profile_dir:
        chromium = Browser(CHROMIUM, profile_dir)
        try:
            yield chromium
        finally:
            chromium.close()


def _expected_summary(data: dict) -> dict[str, float]:
    """The summary figures, computed from the JSON the page embeds, independently of its JS."""
    tests = list(data["tests"].values())
    cpu = sum(t["cpu_python_s"] + t["cpu_native_s"] + t["cpu_system_s"] for t in tests)

    def peak(t: dict) -> float:
        return t.get("peak_mb") or max((ln.get("peak_mb", 0.0) for ln in t["lines"]), default=0)

    return {
        "sum-tests": len(tests),
        "sum-elapsed": sum(t["elapsed_s"] for t in tests),
        "sum-cpu": cpu,
        "sum-python": 100 * sum(t["cpu_python_s"] for t in tests) / cpu,
        "sum-native": 100 * sum(t["cpu_native_s"] for t in tests) / cpu,
        "sum-system": 100 * sum(t["cpu_system_s"] for t in tests) / cpu,
        "sum-peak": max(peak(t) for t in tests),
        "sum-alloc": sum(ln.get("alloc_mb", 0.0) for t in tests for ln in t["lines"]),
        "sum-budgets": sum(1 for t in tests for v in t.get("verdicts", []) if not v["passed"]),
        "sum-leaks": sum(len(t.get("leaks", [])) for t in tests),
    }


def _column(browser: Browser, table: str, index: int) -> list[str]:
    return browser.evaluate(
        f"Array.from(document.querySelectorAll('#{table} tbody tr'))"
        f".map((tr) => tr.cells[{index}].getAttribute('data-sort'))"
    )


def _show(browser: Browser, view: str) -> None:
    """Switches the page to a view (its URL hash) and waits for the flame graphs to draw."""
    browser.evaluate(
        f"location.hash = {json.dumps(view)};"
        " new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))"
    )


def _fits(browser: Browser) -> bool:
    """Nothing cut off or scrolled sideways: neither the page nor any table in it."""
    return browser.evaluate(
        "[document.documentElement, ...document.querySelectorAll('.scroll')]"
        ".every((e) => e.scrollWidth <= e.clientWidth)"
    )


def _frames(browser: Browser, graph: str) -> dict[str, dict[str, Any]]:
    """Each drawn frame of a flame graph by name: its figures, width and colour."""
    return browser.evaluate(
        f"Object.fromEntries(Array.from(document.querySelectorAll('#{graph} > div')).map((d) =>"
        " [d.dataset.name, {value: Number(d.dataset.value), base: Number(d.dataset.base),"
        " width: d.getBoundingClientRect().width, colour: getComputedStyle(d).backgroundColor,"
        f" full: document.querySelector('#{graph}').clientWidth}}]))"
    )


def _key(browser: Browser, key: str, code: int) -> None:
    """A real key press (down and up) on the focused element."""
    for kind in ("keyDown", "keyUp"):
        event = {"type": kind, "key": key, "code": key, "windowsVirtualKeyCode": code}
        browser.call("Input.dispatchKeyEvent", event)


def _rgb(colour: str) -> list[int]:
    return [int(c) for c in colour[colour.index("(") + 1 : colour.index(")")].split(",")[:3]]


def test_report_in_headless_chromium(browser: Browser, tmp_path: Path) -> None:
    session = compared_session(tmp_path)
    long = (
        "tests/test_math.py::test_params[" + "x" * 30 + "-" * 200 + "]"
    )  # must wrap, not overflow
    session.tests[long] = TestProfile(long, "passed", elapsed_s=0.001, cpu_python_s=0.002)
    report = tmp_path / "report.html"
    html_report.write_html(session, report, str(tmp_path))
    browser.open(report.as_uri(), width=1400, height=900)
    assert browser.exceptions() == []

    # The summary cards show the figures of the embedded JSON: raw value and rounded text.
    data = json.loads(json.dumps(session_to_dict(session)))
    shown = browser.evaluate(
        "Object.fromEntries(Array.from(document.querySelectorAll('#summary .value'))"
        ".map((e) => [e.id, [Number(e.dataset.value), e.textContent]]))"
    )
    expected = _expected_summary(data)
    assert set(expected) <= set(shown)
    for key, value in expected.items():
        raw, text = shown[key]
        assert raw == pytest.approx(value, rel=1e-9, abs=1e-9), key
        number = float(text.split()[0].rstrip("%"))
        assert number == pytest.approx(value, abs=0.051), (key, text)
    assert shown["sum-budgets"][1] == "2 of 3"

    # The page opens on what matters, in this order, and fits 1,400 px without cut-off.
    headings = browser.evaluate(
        "Array.from(document.querySelectorAll('#view-overview h3')).map((h) => h.textContent)"
    )
    assert headings == [
        "Failed gates (2)",
        "Hot lines of the suite",
        "Likely leaks",
        "Tests, costliest first",
    ]
    assert _fits(browser)

    # A failed gate beside its baseline: the figures, then the per-line diff, largest change
    # first, the verdict's line highlighted, the vanished line kept.
    gate = browser.evaluate(
        f"document.querySelector('#failed-gates [data-nodeid=\"{MATMUL}\"] .verdict').textContent"
    )
    assert "cpu_s baseline 7.34 s \u2192 measured 7.64 s, limit 7.5 s" in gate
    assert "at tests/test_math.py:7 slow_sum" in gate
    diff = browser.evaluate(
        f"Array.from(document.querySelectorAll('[data-nodeid=\"{MATMUL}\"] table.diff tbody tr'))"
        ".map((tr) => [tr.dataset.line, tr.className, tr.cells[0].textContent,"
        " ...Array.from(tr.cells).slice(1, 4).map((td) => td.textContent)])"
    )
    assert diff[0] == ["tests/test_math.py:7", "hl", "tests/test_math.py:7 slow_sum",
                       "0.170", "0.570", "+0.400"]  # fmt: skip
    assert diff[1][0] == "tests/test_math.py:8" and diff[1][2].endswith("vanished")
    assert diff[1][3:] == ["0.100", "", "\u2212" + "0.100"]

    # The suite's hot lines: the costliest line of all tests first, with its time.
    assert _column(browser, "hot-lines", 0)[0] == "tests/test_math.py:0000014"
    assert float(_column(browser, "hot-lines", 2)[0]) == pytest.approx(6.967)

    # Tests, costliest (by time) first; then sorting by "cpu s" with real mouse clicks.
    by_time = sorted(data["tests"], key=lambda n: -data["tests"][n]["elapsed_s"])
    assert _column(browser, "tests-table", 0) == by_time
    cpu_index = browser.evaluate(
        "Array.from(document.querySelectorAll('#tests-table th')).map((th) => th.textContent)"
    ).index("cpu s")
    by_cpu = sorted(
        data["tests"],
        key=lambda n: (
            -sum(data["tests"][n][k] for k in ("cpu_python_s", "cpu_native_s", "cpu_system_s"))
        ),
    )
    header = f"#tests-table th:nth-child({cpu_index + 1})"
    browser.click(header)
    assert _column(browser, "tests-table", 0) == by_cpu
    assert browser.evaluate(f"document.querySelector('{header}').getAttribute('aria-sort')") == (
        "descending"
    )
    browser.click(header)
    assert _column(browser, "tests-table", 0) == by_cpu[::-1]
    browser.click("#tests-table th:nth-child(1)")  # text columns sort A to Z
    assert _column(browser, "tests-table", 0) == sorted(data["tests"])

    # The filter keeps the tests whose id holds the text (any case); empty shows them all.
    visible = (
        "(() => { const box = document.querySelector('#tests-filter'); box.value = TEXT;"
        " box.dispatchEvent(new Event('input'));"
        " return Array.from(document.querySelectorAll('#tests-table tbody tr'))"
        ".filter((tr) => !tr.hidden).map((tr) => tr.cells[0].getAttribute('data-sort')); })()"
    )
    word = sorted(data["tests"])[0].split("::")[-1][:6]
    wanted = sorted(n for n in data["tests"] if word.lower() in n.lower())
    assert 0 < len(wanted) < len(data["tests"]), word
    assert sorted(browser.evaluate(visible.replace("TEXT", repr(word.upper())))) == wanted
    assert len(browser.evaluate(visible.replace("TEXT", "''"))) == len(data["tests"])
    _save_screenshot(browser, tmp_path, "html-report.png")

    # Keyboard: the Right arrow on the focused tab opens the next view.
    browser.evaluate("document.querySelector('#tab-overview').focus()")
    _key(browser, "ArrowRight", 39)
    assert browser.evaluate("location.hash") == "#source"
    assert browser.evaluate("document.activeElement.id") == "tab-source"

    # The source view: every line of the file, its figures added up over the suite, the
    # selected test's lines highlighted, cold code folded until asked for.
    _show(browser, "#source/tests%2Ftest_math.py")
    rows = browser.evaluate(
        "Object.fromEntries(Array.from(document.querySelectorAll('#source-table tbody tr'))"
        ".filter((tr) => tr.dataset.line).map((tr) => [tr.dataset.line, {text:"
        " tr.cells[6].textContent, cpu: tr.dataset.cpu, gpu: tr.dataset.gpu,"
        " hl: tr.classList.contains('hl')}]))"
    )
    text = (tmp_path / MATH).read_text().splitlines()
    assert sorted(map(int, rows)) == list(range(3, len(text) + 1))  # 1-2: cold, folded
    assert all(rows[str(n)]["text"] == text[n - 1] for n in range(3, len(text) + 1))
    assert float(rows["14"]["cpu"]) == pytest.approx(0.007 + 6.89 + 0.07)
    assert float(rows["14"]["gpu"]) == 87.5 and "cpu" not in rows["13"]  # no figure
    assert _fits(browser)
    browser.click("#source-table tr.fold button")
    assert browser.evaluate("document.querySelector('#src-1 td.code').textContent") == text[0]
    browser.evaluate(
        "(() => { const s = document.querySelector('#source-test');"
        f" s.value = String({list(data['tests']).index(MATMUL)});"
        " s.dispatchEvent(new Event('change')); })()"
    )
    lit = browser.evaluate(
        "Array.from(document.querySelectorAll('#source-table tr.hl')).map((tr) => tr.dataset.line)"
    )
    assert lit == ["6", "7", "12", "14"]

    # The suite's flame graph: the root holds every line's time; a click zooms into a frame.
    _show(browser, "#flame")
    frames = _frames(browser, "flame-suite")
    total = sum(
        ln["cpu_python_s"] + ln["cpu_native_s"] + ln["cpu_system_s"] + ln.get("wait_s", 0)
        for t in data["tests"].values()
        for ln in t["lines"]
    )
    assert frames["all tests"]["value"] == pytest.approx(total)
    assert frames["line 14"]["value"] == pytest.approx(6.967)
    assert frames["line 14"]["width"] < 0.95 * frames["line 14"]["full"]
    browser.click("#flame-suite > div[data-name='line 14']")
    zoomed = _frames(browser, "flame-suite")
    assert zoomed["line 14"]["width"] == pytest.approx(zoomed["line 14"]["full"], abs=2)
    assert "line 7" not in zoomed  # another branch: off screen
    browser.evaluate(
        "document.querySelector('#flame-suite > div[data-name=\"all tests\"]').focus()"
    )
    _key(browser, "Enter", 13)  # Enter on the root zooms back out
    assert "line 7" in _frames(browser, "flame-suite")
    # ...and the suite's differential one: every compared test's lines against their baselines.
    suite = _frames(browser, "flame-suite-diff")
    assert suite["1 compared tests vs their baselines"]["base"] == pytest.approx(
        7.34
    )  # 0.05+0.17+0.1+0.053+6.967
    assert (suite["line 7"]["value"], suite["line 7"]["base"]) == (
        pytest.approx(0.57), pytest.approx(0.17))  # fmt: skip
    assert _fits(browser)

    # A test's view: its flame graph and the differential one against its baseline (CPU
    # seconds per line: red grew, blue shrank; the vanished line still drawn).
    for index, (nodeid, test) in enumerate(data["tests"].items()):
        _show(browser, f"#test/{index}")
        assert browser.evaluate("document.querySelectorAll('table.lines tbody tr').length") == len(
            test["lines"]
        ), nodeid
        assert _fits(browser), nodeid
        assert browser.evaluate("!!document.querySelector('#flame-diff')") == (nodeid == MATMUL)
    _show(browser, f"#test/{list(data['tests']).index(MATMUL)}")
    mine = _frames(browser, "flame-test")
    assert mine[MATMUL]["value"] == pytest.approx(0.61 + 6.95 + 0.08 - 0.0, abs=0.01)
    diff_frames = _frames(browser, "flame-diff")
    rows = json.loads(_blocks(report.read_text())["compare-data"])["tests"][MATMUL]["lines"]
    root = diff_frames[f"{MATMUL} vs baseline"]
    assert root["value"] == pytest.approx(sum((r[4] or {}).get("cpu_s", 0) for r in rows))
    assert root["base"] == pytest.approx(sum((r[3] or {}).get("cpu_s", 0) for r in rows))
    grew, gone = diff_frames["line 7"], diff_frames["line 8"]
    assert (grew["value"], grew["base"]) == (pytest.approx(0.57), pytest.approx(0.17))
    assert (gone["value"], gone["base"]) == (0, pytest.approx(0.1)) and gone["width"] > 5
    red, blue = _rgb(grew["colour"]), _rgb(gone["colour"])
    assert red[0] > red[2] and blue[2] > blue[0]
    _save_screenshot(browser, tmp_path, None)

    # No network: the only request is the report file itself, and the CSP stopped nothing.
    assert browser.requested_urls() == [report.as_uri()]
    assert browser.evaluate("window.__cspViolations") == []
    assert browser.exceptions() == []


def _save_screenshot(browser: Browser, tmp_path: Path, name: str | None) -> None:
    shot = tmp_path / "report.png"
    browser.screenshot(shot)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    save_dir = os.environ.get("PYTEST_SCALENE_SCREENSHOTS")
    if save_dir and name:  # for docs/img: PYTEST_SCALENE_SCREENSHOTS=docs/img pytest this file
        shutil.copy(shot, Path(save_dir) / name)


def test_flame_graphs_draw_recorded_stacks(browser: Browser, tmp_path: Path) -> None:
    write_sources(tmp_path)
    report = tmp_path / "report.html"
    session = sample_session()
    for i in range(150):  # the tests table draws the 100 costliest until asked for all
        nodeid = f"tests/test_many.py::test_{i:03}"
        session.tests[nodeid] = TestProfile(nodeid, "passed", elapsed_s=1 + i / 1000)
    quick = "tests/test_math.py::test_quick"  # failed an A/B comparison against main
    session.tests[quick].extra["ab"] = {
        "ref": "main", "verdict": "fail", "baseline_cpu_s": 0.02, "cpu_s": 0.03,
        "functions": [{"file": MATH, "function": "slow_sum", "line": 7, "verdict": "fail",
                       "self_ratio": 2.0, "share": 0.6, "baseline_share": 0.45}],
    }  # fmt: skip
    session.tests[quick].verdicts = [
        Verdict(REGRESSION, "cpu_s", 0.026, 0.03, False, "1.50x slower than main", None, 0.02)
    ]
    html_report.write_html(session, report, str(tmp_path), stacks=stack_recorder())
    browser.open(report.as_uri(), width=1400, height=900)
    # Its gate shows the judged functions' shares at the ref and now.
    cells = browser.evaluate(
        f"Array.from(document.querySelectorAll('[data-nodeid=\"{quick}\"] table.diff td'))"
        ".map((td) => td.textContent)"
    )
    assert cells == ["tests/test_math.py:7 slow_sum", "fail", "45%", "60%", "2.00x"]
    _show(browser, f"#test/{list(session.tests).index(quick)}")
    ab = _frames(browser, "flame-diff")  # self CPU per call: share x median, the rest apart
    slow, rest = ab["slow_sum (tests/test_math.py)"], ab["(other functions)"]
    assert (slow["value"], slow["base"]) == (pytest.approx(0.018), pytest.approx(0.009))
    assert (rest["value"], rest["base"]) == (pytest.approx(0.012), pytest.approx(0.011))
    _show(browser, "#overview")
    rows = "document.querySelectorAll('#tests-table tbody tr').length"
    assert browser.evaluate(rows) == 100
    assert _column(browser, "tests-table", 0)[2] == "tests/test_many.py::test_149"
    search = (
        "(() => { const box = document.querySelector('#tests-filter'); box.value = TEXT;"
        " box.dispatchEvent(new Event('input')); })()"
    )
    browser.evaluate(search.replace("TEXT", "'test_00'"))
    assert len(_column(browser, "tests-table", 0)) == 10  # test_000..009: beyond the first 100
    browser.evaluate(search.replace("TEXT", "''"))
    browser.click("#tests-table + button.more")
    assert browser.evaluate(rows) == len(session.tests)
    _show(browser, f"#test/{list(session.tests).index(MATMUL)}")
    frames = _frames(browser, "flame-test")
    assert frames[MATMUL]["value"] == pytest.approx(7.4)
    assert frames["test_matmul (tests/test_math.py:11)"]["value"] == pytest.approx(7.4)
    inner = frames["slow_sum (tests/test_math.py:4)"]
    assert inner["value"] == pytest.approx(0.5)
    assert inner["width"] / inner["full"] == pytest.approx(0.5 / 7.4, abs=0.01)
    assert browser.exceptions() == []


def test_the_network_checks_catch_a_page_that_fetches(browser: Browser, tmp_path: Path) -> None:
    """Control: the two detectors above do fire when a page reaches out (port 9 is discard;
    nothing needs to answer)."""
    plain = tmp_path / "plain.html"
    plain.write_text('<!DOCTYPE html><img src="http://127.0.0.1:9/pixel.png">')
    browser.open(plain.as_uri())
    assert "http://127.0.0.1:9/pixel.png" in browser.requested_urls()

    csp = html_report._template()[1]
    guarded = tmp_path / "guarded.html"
    guarded.write_text(
        f'<!DOCTYPE html><meta http-equiv="Content-Security-Policy" content="{csp}">'
        '<img src="http://127.0.0.1:9/pixel.png">'
    )
    browser.open(guarded.as_uri())
    assert "http://127.0.0.1:9/pixel.png" in browser.requested_urls()  # seen...
    blocked = [
        e["params"].get("blockedReason")
        for e in browser.events
        if e["method"] == "Network.loadingFailed"
    ]
    assert "csp" in blocked  # ...stopped by the report's CSP...
    violations = browser.evaluate("window.__cspViolations")
    assert any("127.0.0.1:9" in v for v in violations), violations  # ...and recorded
