"""The Markdown summary for a pull request (issue 26): regressions first, each with its lines
before and after and their functions; everything else collapsed; under GitHub's comment size
at 2,000 tests, cutting the collapsed parts, never a regression unsaid."""

from __future__ import annotations

import re
from pathlib import Path

from report_samples import sample_session, write_sources

from pytest_scalene.core.model import LineKey, SessionProfile, TestProfile
from pytest_scalene.core.verdict import Verdict
from pytest_scalene.reports.markdown_report import MAX_CHARS, RunOutcomes, render

GITHUB_LIMIT = 65_536
SOURCE = "def crunch(n):\n    total = 0\n    for i in range(n):\n        total += i * i % 7\n"


def _regressed(nodeid: str, before: float, after: float) -> TestProfile:
    """A test whose line 4 of lib.py regressed against its baseline, its total with it."""
    test = TestProfile(nodeid, outcome="failed", cpu_python_s=after)
    test.line(LineKey("lib.py", 4, "crunch"), function_line=1).cpu_python_s = after
    common = {"kind": "regression", "metric": "cpu_s", "baseline": before, "value": after}
    test.verdicts = [
        Verdict.from_dict(
            {**common, "limit": 1.75 * before, "passed": False, "line": None,
             "message": f"CPU time {after:.2f} s vs baseline {before:.2f} s (fails above +75%)"}
        ),
        Verdict.from_dict(
            {**common, "limit": 1.3 * before, "passed": False, "line": "lib.py:4 crunch",
             "message": f"CPU time regressed at lib.py:4 crunch: {after:.2f} s vs {before:.2f} s"}
        ),
    ]  # fmt: skip
    return test


def _ab_regressed(nodeid: str) -> TestProfile:
    """A test the A/B comparison failed, as compare_ref/ref_judge.py records it."""
    test = TestProfile(nodeid, outcome="failed")
    test.extra["ab"] = {
        "ref": "origin/main",
        "commit": "66945d3f90af55dbe7da7f1303acba43708a1a28",
        "verdict": "fail",
        "ratio": 1.529,
        "fails_above": 1.3,
        "pairs": 10,
        "baseline_cpu_s": 0.002475,
        "cpu_s": 0.003666,
        "functions": [
            {"file": "lib.py", "function": "helper", "line": 9, "verdict": "fail",
             "self_ratio": 1.8, "ratio": 1.8}
        ],
        "lines": [
            {"file": "lib.py", "function": "crunch", "line": 4,
             "baseline_cpu_s": 0.170397, "cpu_s": 0.263146}
        ],
    }  # fmt: skip
    test.verdicts = [
        Verdict.from_dict(
            {"kind": "regression", "metric": "cpu_s", "limit": 0.003218, "baseline": 0.002475,
             "value": 0.003666, "passed": False, "line": "lib.py:4 crunch",
             "message": "CPU time regressed against origin/main (66945d3f90af): 0.003666 s vs "
             "0.002475 s per call, median of 10 paired ratios 1.529x (fails above 1.30x)"}
        )
    ]  # fmt: skip
    return test


def _session(root: Path, *tests: TestProfile) -> SessionProfile:
    write_sources(root)
    (root / "lib.py").write_text(SOURCE + "\n" * 4 + "def helper():\n    return 1\n")
    session = sample_session()  # a failed budget, top lines, notes
    for test in tests:
        session.tests[test.nodeid] = test
    return session


def _section(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0]


def test_regressions_come_first_with_their_lines_before_and_after(tmp_path: Path) -> None:
    session = _session(tmp_path, _regressed("t.py::test_mild", 1.0, 1.9))
    session.tests["t.py::test_bad"] = _regressed("t.py::test_bad", 1.0, 3.0)
    text = render(session, str(tmp_path))
    assert text.index("### Regressions") < text.index("### Other gate failures")
    assert text.index("### Other gate failures") < text.index("<details>")
    regressions = _section(text, "### Regressions", "### Other gate failures")
    assert regressions.index("t.py::test_bad") < regressions.index("t.py::test_mild")  # worst first
    bad = _section(regressions, "#### `t.py::test_bad`", "####")
    assert "- CPU time 3.00 s vs baseline 1.00 s (fails above +75%)" in bad
    assert "| line | function | metric | baseline | now | change | source |" in bad
    row = "| `lib.py:4` | `crunch` | CPU time | 1.00 s | 3.00 s | 3.00x | `total += i * i % 7` |"
    assert row in bad
    # The budget failure stays out of the regressions, in its own table.
    others = _section(text, "### Other gate failures", "<details>")
    assert "| `tests/test_etl.py::test_load_frame` | budget | peak_mb | 200 MB |" in others
    assert "t.py::" not in others


def test_an_ab_regression_names_the_ref_and_the_functions(tmp_path: Path) -> None:
    text = render(_session(tmp_path, _ab_regressed("t.py::test_ab")), str(tmp_path))
    block = _section(text, "#### `t.py::test_ab`", "### Other gate failures")
    assert "- CPU time regressed against origin/main (66945d3f90af): 0.003666 s" in block
    assert "| line | function | metric | origin/main `66945d3f` | now | change | source |" in block
    assert "| `lib.py:4` | `crunch` | CPU time | 170 ms | 263 ms | 1.54x |" in block
    # A function the function rule failed, with its ratio: its time per side is not sampled alone.
    assert "| `lib.py:9` | `helper` | CPU time (self) |  |  | 1.80x | `def helper():` |" in block
    assert "sampled self CPU time over the 10 runs of each side" in block


def test_everything_else_is_collapsed(tmp_path: Path) -> None:
    session = _session(tmp_path, _regressed("t.py::test_bad", 1.0, 3.0))
    outcomes = RunOutcomes(
        {"failed": 3, "passed": 1},
        [
            ("t.py::test_bad", "call", "CPU time 3.00 s vs baseline 1.00 s (fails above +75%)"),
            ("t.py::test_broken", "call", "AssertionError: assert 1 == 2"),
        ],
    )
    text = render(session, str(tmp_path), outcomes)
    details = text[text.index("<details>") :]
    assert text.count("<details>") == text.count("</details>") == 2
    assert "<summary>Test failures: 2</summary>\n\n" in details
    assert "| `t.py::test_broken` | call | AssertionError: assert 1 == 2 |" in details
    assert "| `t.py::test_bad` | call | CPU time 3.00 s" in details  # the gate's own too
    assert "<summary>Top lines of 3 test(s), at most 5 each</summary>" in details
    assert "`a = a @ a / size`" in details
    assert "### Top lines" not in text and "Tests: 3 failed, 1 passed." in text


def test_a_note_many_tests_share_is_said_once(tmp_path: Path) -> None:
    session = _session(tmp_path)
    note = "the baseline was saved with --profile-repeat=1, this run uses 3"
    for n in range(5):
        test = session.tests[f"t.py::test_{n}"] = TestProfile(f"t.py::test_{n}")
        test.extra["baseline"] = {"notes": [note]}
    session.tests["t.py::test_4"].extra["not_repeatable"] = "not repeatable: run 2 failed"
    text = render(session, str(tmp_path))
    reported = _section(text, "<summary>Reported, not failed: 6</summary>", "</details>")
    assert reported.splitlines()[2] == "- `t.py::test_4`: not repeatable: run 2 failed"
    shared = "- 5 tests (`t.py::test_0`, `t.py::test_1`, `t.py::test_2` and 2 more): " + note
    assert shared in reported and reported.count(note) == 1


def _big_session(root: Path, tests: int, regressed: int) -> tuple[SessionProfile, RunOutcomes]:
    """`tests` tests, each with 5 lines, a note and a long failure; `regressed` of them
    regressed, by 1.5x to 3.5x."""
    session = _session(root)
    failures = []
    for n in range(tests):
        nodeid = f"tests/suite/test_module_{n // 50}.py::test_case_with_a_long_name[{n}]"
        if n < regressed:
            test = _regressed(nodeid, 1.0, 1.5 + 2 * n / max(regressed, 1))
        else:
            test = TestProfile(nodeid, outcome="passed", cpu_python_s=0.5)
        for line in range(1, 6):
            test.line(LineKey("lib.py", line, "crunch"), function_line=1).cpu_python_s = 0.1
        test.extra["baseline"] = {"notes": [f"lib.py:{n} improved: 0.10 s vs 0.20 s"]}
        session.tests[nodeid] = test
        failures.append((nodeid, "call", "AssertionError: " + "x" * 100))
    return session, RunOutcomes({"failed": tests}, failures)


def _left_out(text: str) -> int:
    return sum(int(n) for n in re.findall(r"_(\d+) more left out to keep this summary", text))


def test_two_thousand_tests_fit_a_github_comment(tmp_path: Path) -> None:
    session, outcomes = _big_session(tmp_path, 2000, regressed=40)
    text = render(session, str(tmp_path), outcomes)
    assert len(text) <= MAX_CHARS < GITHUB_LIMIT
    # Every regression whole, with its table; the collapsed parts cut, saying by how much.
    assert text.count("| `lib.py:4` | `crunch` | CPU time |") == 40
    assert text.count("\n#### `tests/suite/") >= 40
    failures = _section(text, "Test failures: 2000", "</details>")
    reported = _section(text, "Reported, not failed", "</details>")
    top = _section(text, "Top lines of 20 test(s)", "</details>")
    shown = [
        failures.count("\n| `tests/suite/"),
        reported.count("\n- `tests/suite/"),
        top.count("\n#### `"),
    ]
    assert all(n > 0 for n in shown) and sum(shown) < 2000 + 2000 + 20  # each part a share
    assert _left_out(text) == 2000 + 2000 + 20 - sum(shown)
    assert text.count("<details>") == text.count("</details>") == 3


def test_when_regressions_alone_overflow_they_shorten_before_any_is_left_out(
    tmp_path: Path,
) -> None:
    session, outcomes = _big_session(tmp_path, 2000, regressed=2000)
    text = render(session, str(tmp_path), outcomes)
    assert len(text) <= MAX_CHARS
    regressions = _section(text, "### Regressions", "### Other gate failures")
    full = regressions.count("\n#### `")
    short = len(re.findall(r"^- `tests/suite/", regressions, re.M))
    assert full > 0 and short > 0
    # The worst keep their tables: the first in full is the worst of all (3.5x).
    assert "[1999]`" in regressions.split("\n#### ")[1]
    said = re.search(r"_(\d+) more left out", regressions)
    assert full + short + (int(said.group(1)) if said else 0) == 2000


def test_a_test_total_regressed_shows_the_lines_that_grew_against_the_stored_baseline(
    tmp_path: Path,
) -> None:
    from pytest_scalene.gates import baseline_store
    from pytest_scalene.gates.baseline_entry import entry_from_profile

    session = _session(tmp_path)
    nodeid = "t.py::test_total"

    def profile(line_cpu: dict[int, float]) -> TestProfile:
        test = TestProfile(nodeid, outcome="failed", cpu_python_s=sum(line_cpu.values()))
        for line, cpu in line_cpu.items():
            test.line(LineKey("lib.py", line, "crunch"), function_line=1).cpu_python_s = cpu
        return test

    saved = profile({2: 0.10, 3: 0.20, 4: 0.30})
    module = baseline_store.ModuleBaseline(
        "t.py", 0.01, "cpu", 1, {nodeid: entry_from_profile(saved, str(tmp_path))}
    )
    (tmp_path / "baselines").mkdir()
    (tmp_path / "baselines" / "t.py.json").write_text(baseline_store.dumps(module))
    # Now: line 4 grew 3x, line 3 a little, line 2 shrank, line 1 is new.
    test = session.tests[nodeid] = profile({1: 0.05, 2: 0.05, 3: 0.30, 4: 0.90})
    test.extra["baseline"] = {"file": "baselines/t.py.json", "notes": []}
    test.verdicts = [
        Verdict.from_dict(
            {"kind": "regression", "metric": "cpu_s", "limit": 0.8, "baseline": 0.6,
             "value": 1.3, "passed": False, "line": None,
             "message": "CPU time 1.30 s vs baseline 0.60 s (+117%; fails above +33%)"}
        )
    ]  # fmt: skip
    text = render(session, str(tmp_path))
    block = _section(text, f"#### `{nodeid}`", "### Other gate failures")
    rows = [r for r in block.splitlines() if r.startswith("| `lib.py:")]
    assert rows == [
        "| `lib.py:4` | `crunch` | CPU time | 300 ms | 900 ms | 3.00x | `total += i * i % 7` |",
        "| `lib.py:3` | `crunch` | CPU time | 200 ms | 300 ms | 1.50x | `for i in range(n):` |",
        "| `lib.py:1` | `crunch` | CPU time | new | 50 ms |  | `def crunch(n):` |",
    ]
    assert "paired with the baseline's as the comparison pairs them" in block
