"""Test selection by code map (pytest_scalene/selection/, docs/selection.md): a profiled run
records which code each test ran; a change re-measures the tests it affects and only those.

Each case records the map through pytest (a baseline save, the cheapest profiled run that
stores one), edits one thing, and asks the selection rule which tests it would measure; two
end-to-end runs check that the gates act on it (instruction counts, A/B)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_scalene.selection.code_map import FILE_NAME, load
from pytest_scalene.selection.decide import why_measured, working_tree

SHAPES = '''
"""Shapes."""
SCALE = 2


class Shape:
    def describe(self):
        return f"{type(self).__name__} {self.area()}"


class Square(Shape):
    def area(self):
        return 4 * SCALE


class Circle(Shape):
    def area(self):
        return 3


def by_key(value):
    return -value


def ordered(values):
    return sorted(values, key=by_key)  # by_key runs only as a callback from C


def never_run():
    return "untouched"
'''
CONFTEST = """
import pytest

LEVEL = 1


@pytest.fixture(scope="session")
def numbers():
    return [3, 1, 2]
"""
TESTS = """
import shapes


def test_square():
    assert shapes.Square().describe().startswith("Square")


def test_circle():
    assert shapes.Circle().describe() == "Circle 3"


def test_ordered(numbers):
    assert shapes.ordered(numbers) == [3, 2, 1]


def test_count(numbers):  # the session fixture ran for test_ordered, before this test
    assert len(numbers) == 3


def test_plain():
    assert sum([1, 2]) == 3


def test_table():
    import tabulate

    assert "1" in tabulate.tabulate([[1]])
"""
ALL = {"test_square", "test_circle", "test_ordered", "test_count", "test_plain", "test_table"}


@pytest.fixture
def recorded(pytester: pytest.Pytester) -> Path:
    pytester.makepyfile(shapes=SHAPES, conftest=CONFTEST, test_shapes=TESTS)
    pytester.makeini("[pytest]\npythonpath = .\n")
    result = pytester.runpytest_subprocess("--profile-save-baseline", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=len(ALL))
    assert (pytester.path / "baselines" / FILE_NAME).is_file()
    return pytester.path


def measured(root: Path) -> dict[str, str]:
    """Test name -> why, for each test the rule would measure now."""
    code_map = load(root / "baselines" / FILE_NAME)
    assert code_map is not None
    tree = working_tree(root)
    found = {}
    for name in sorted(ALL):
        why = why_measured(code_map, f"test_shapes.py::{name}", [tree])
        if why is not None:
            found[name] = why
    return found


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_unchanged_code_measures_nothing(recorded: Path) -> None:
    assert measured(recorded) == {}


def test_docs_and_unrun_code_measure_nothing(recorded: Path) -> None:
    edit(recorded / "shapes.py", '"""Shapes."""', '"""Shapes, documented at length."""\n\n')
    edit(recorded / "shapes.py", 'return "untouched"', 'return "touched"')
    (recorded / "README.md").write_text("docs only\n")
    assert measured(recorded) == {}


def test_a_callback_reached_from_c(recorded: Path) -> None:
    edit(recorded / "shapes.py", "return -value", "return -value * 1")
    assert set(measured(recorded)) == {"test_ordered"}
    assert "by_key" in measured(recorded)["test_ordered"]


def test_a_method_overridden_in_a_subclass(recorded: Path) -> None:
    edit(recorded / "shapes.py", "return 3\n", "return int(3)\n")  # Circle.area
    assert set(measured(recorded)) == {"test_circle"}
    assert "Circle.area" in measured(recorded)["test_circle"]


def test_a_module_constant_read_by_unchanged_code(recorded: Path) -> None:
    edit(recorded / "shapes.py", "SCALE = 2", "SCALE = 3")
    assert set(measured(recorded)) == {"test_square", "test_circle", "test_ordered"}
    # test_count ran only its own file's code and the fixture: SCALE is not its input


def test_a_changed_fixture(recorded: Path) -> None:
    edit(recorded / "conftest.py", "return [3, 1, 2]", "return [2, 3, 1]")
    assert set(measured(recorded)) == {"test_ordered", "test_count"}


def test_a_changed_conftest(recorded: Path) -> None:
    edit(recorded / "conftest.py", "LEVEL = 1", "LEVEL = 2")
    assert set(measured(recorded)) == ALL


def test_a_changed_dependency_version(recorded: Path) -> None:
    path = recorded / "baselines" / FILE_NAME
    data = json.loads(path.read_text())
    assert "tabulate" in data["distributions"]  # only test_table ran its code
    data["distributions"]["tabulate"] = "0.0.1"  # as if recorded with another version
    path.write_text(json.dumps(data))
    found = measured(recorded)
    assert set(found) == {"test_table"}
    assert "tabulate changed: 0.0.1 when recorded" in found["test_table"]


def test_the_map_is_byte_identical_when_nothing_changed(
    recorded: Path, pytester: pytest.Pytester
) -> None:
    path = recorded / "baselines" / FILE_NAME
    before = path.read_bytes()
    result = pytester.runpytest_subprocess("--profile-save-baseline", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=len(ALL))
    assert path.read_bytes() == before


@pytest.mark.version_independent
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind (Debian's package)")
def test_the_instruction_gate_measures_only_changed_tests(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(shapes=SHAPES, conftest=CONFTEST, test_shapes=TESTS)
    pytester.makeini("[pytest]\npythonpath = .\n")
    gate = ("--profile-measure=instructions", "-p", "no:cacheprovider")
    everything = len(ALL)
    result = pytester.runpytest_subprocess(*gate, "--profile-save-baseline")
    result.assert_outcomes(passed=everything)
    edit(pytester.path / "shapes.py", "return 3\n", "return int(3)\n")
    out = pytester.path / "profile.json"
    compare = (*gate, "--profile-compare", f"--profile-json={out}")
    result = pytester.runpytest_subprocess(*compare)
    result.assert_outcomes(passed=everything)
    report = json.loads(out.read_text())
    assert list(report["selection"]["measured"]) == ["test_shapes.py::test_circle"]
    assert len(report["selection"]["unchanged"]) == everything - 1
    assert set(report["tests"]) == {"test_shapes.py::test_circle"}  # counted and profiled
    assert report["tests"]["test_shapes.py::test_circle"]["instructions"] > 0
    result.stdout.fnmatch_lines([f"*{everything - 1} test(s) unchanged since the code map*"])
    # A missing or unreadable map measures every test, and says why.
    path = pytester.path / "baselines" / FILE_NAME
    for damage, said in (("corrupt", "is not JSON"), ("missing", "no code map at")):
        if damage == "missing":
            path.unlink()
        else:
            path.write_text('{"format": "pytest-scalene code map", "version": 1, "tests": [')
        result = pytester.runpytest_subprocess(*compare)
        result.assert_outcomes(passed=everything)
        selection = json.loads(out.read_text())["selection"]
        assert len(selection["measured"]) == everything and selection["unchanged"] == []
        assert said in selection["note"]
        result.stdout.fnmatch_lines([f"*{said}*every test is measured*"])


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_ab_gate_compares_only_changed_tests(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(shapes=SHAPES, conftest=CONFTEST, test_shapes=TESTS)
    pytester.makeini("[pytest]\npythonpath = .\n")

    def git(*args: str) -> None:
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=pytester.path,
            check=True,
            capture_output=True,
        )

    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "base")  # no code map stored: the first run records one at REF
    edit(pytester.path / "shapes.py", "return 4 * SCALE", "return 2 * SCALE * 2")
    git("commit", "-qam", "square")
    out = pytester.path / "profile.json"
    ab = ("--profile-compare-ref=HEAD~1", f"--profile-json={out}", "-p", "no:cacheprovider")
    for first in (True, False):
        result = pytester.runpytest_subprocess(*ab)
        result.assert_outcomes(passed=len(ALL))
        result.stdout.fnmatch_lines(["*comparing 1 test(s) with HEAD~1*"])
        selection = json.loads(out.read_text())["selection"]
        assert set(selection["measured"]) == {"test_shapes.py::test_square"}
        why = selection["measured"]["test_shapes.py::test_square"]
        assert "Square.area changed in" in why
        assert (selection["note"] or "").startswith("the code map was recorded at HEAD~1") == first
        assert (pytester.path / "baselines" / FILE_NAME).is_file()  # stored for the next run


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_with_no_map_file_the_historys_newest_map_decides(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(shapes=SHAPES, conftest=CONFTEST, test_shapes=TESTS)
    pytester.makeini("[pytest]\npythonpath = .\n")
    history = f"--profile-history={pytester.path / 'history.db'}"
    result = pytester.runpytest_subprocess("--profile", history, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=len(ALL))
    assert not (pytester.path / "baselines").exists()  # only the history has the map
    for args in (("init", "-q"), ("add", "-A"), ("commit", "-qm", "base")):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=pytester.path,
            check=True,
            capture_output=True,
        )
    edit(pytester.path / "shapes.py", "return 3\n", "return int(3)\n")  # Circle.area
    out = pytester.path / "profile.json"
    result = pytester.runpytest_subprocess(
        "--profile-compare-ref=HEAD", history, f"--profile-json={out}", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=len(ALL))
    selection = json.loads(out.read_text())["selection"]
    assert set(selection["measured"]) == {"test_shapes.py::test_circle"}
    assert "the code map of the history's newest run decides" in selection["note"]


def test_xdist_workers_maps_reach_the_stored_one(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    pytester.makepyfile(shapes=SHAPES, conftest=CONFTEST, test_shapes=TESTS)
    pytester.makeini("[pytest]\npythonpath = .\n")
    result = pytester.runpytest_subprocess(
        "--profile-save-baseline", "-n", "2", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=len(ALL))
    assert measured(pytester.path) == {}  # every test has its entry, from either worker
    edit(pytester.path / "shapes.py", "return -value", "return -value * 1")
    assert set(measured(pytester.path)) == {"test_ordered"}


def test_a_run_records_only_the_tests_whose_stored_entry_no_longer_holds(
    recorded: Path, pytester: pytest.Pytester
) -> None:
    edit(recorded / "shapes.py", "return 3\n", "return int(3)\n")  # Circle.area
    assert set(measured(recorded)) == {"test_circle"}
    result = pytester.runpytest_subprocess("--profile-save-baseline", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=len(ALL))
    result.stdout.fnmatch_lines(["*code-map.json: 1 test(s) recorded, 5 unchanged since*"])
    assert measured(recorded) == {}  # the re-recorded entry has the new digest, the rest held


def test_moving_code_changes_no_digest_and_a_changed_line_does() -> None:
    from pytest_scalene.selection.digests import digest_source

    before = digest_source(SHAPES, "shapes.py").digests
    moved = SHAPES.replace("SCALE = 2\n", "\n\n\nSCALE = 2\n")  # every class and def moves down
    assert digest_source(moved, "shapes.py").digests == before  # 3.13 class bodies hold a line
    edited = digest_source(SHAPES.replace("return 3\n", "return 4\n"), "shapes.py").digests
    assert sorted(k for k in before if before[k] != edited[k]) == [
        "<module>",
        "Circle",
        "Circle.area",
        "Circle.area@top",
    ]


def test_a_file_holding_the_recorded_bytes_is_not_digested_again(recorded: Path) -> None:
    code_map = load(recorded / "baselines" / FILE_NAME)
    assert code_map is not None and "shapes.py" in code_map.sources
    tree = working_tree(recorded)

    def no_digests(key: str) -> None:
        raise AssertionError(f"{key} digested, though its bytes are the recorded ones")

    tree.digests = no_digests  # type: ignore[method-assign]
    assert all(why_measured(code_map, f"test_shapes.py::{n}", [tree]) is None for n in ALL)
    # Changed bytes are digested: a docstring edit still measures nothing, a code edit does.
    edit(recorded / "shapes.py", '"""Shapes."""', '"""Shapes, documented."""')
    assert measured(recorded) == {}
    edit(recorded / "shapes.py", "return 3\n", "return 4\n")
    assert set(measured(recorded)) == {"test_circle"}


def test_a_merged_map_keeps_a_files_fingerprint_only_where_its_digests_share_it() -> None:
    from pytest_scalene.selection.code_map import CodeMap, TestCode

    def one(nodeid: str, ident: str, source: str) -> CodeMap:
        test = TestCode(code={"a.py": [ident], "b.py": ["g"]})
        files = {"a.py": {ident: f"d-{ident}-{source}"}, "b.py": {"g": "d-g"}}
        return CodeMap("py", {}, files, {nodeid: test}, {"a.py": source, "b.py": "same"})

    older = one("t1", "f", "bytes-1")
    merged = older.merged(one("t2", "h", "bytes-2"))  # t1 kept: its digests still hold
    assert set(merged.tests) == {"t1", "t2"}
    # a.py's digests came from two versions of its bytes: no fingerprint stands for them all.
    assert merged.sources == {"b.py": "same"}
    assert older.merged(one("t2", "h", "bytes-1")).sources == {"a.py": "bytes-1", "b.py": "same"}


TWO_TABLES = """
import tabulate


def test_first_table():
    assert "1" in tabulate.tabulate([[1]])


def test_plain_between():
    assert sum([1, 2]) == 3


def test_second_table():  # runs tabulate's code after test_first_table ran it first
    assert "2" in tabulate.tabulate([[2]])
"""


def test_a_dependency_run_again_by_a_later_test_is_in_that_tests_map(
    pytester: pytest.Pytester,
) -> None:
    # On 3.12+ installed code is seen only where it first runs in the process: the later
    # tests are given every distribution run so far (more re-measured, never fewer).
    pytester.makepyfile(test_tables=TWO_TABLES)
    result = pytester.runpytest_subprocess("--profile-save-baseline", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
    code_map = load(pytester.path / "baselines" / FILE_NAME)
    assert code_map is not None
    for name in ("test_first_table", "test_second_table"):
        assert "tabulate" in code_map.tests[f"test_tables.py::{name}"].distributions, name


def test_a_changed_compiled_module_of_the_project_measures_every_test(
    pytester: pytest.Pytester,
) -> None:
    # No code object runs inside a compiled extension: the map cannot tell which tests call
    # into it, so a change to it (a rebuild, or the module no longer built) measures them all.
    import pytest_scalene._timer_calls as built

    compiled = pytester.path / Path(built.__file__).name  # imported as top-level _timer_calls
    shutil.copyfile(built.__file__, compiled)
    pytester.makepyfile(
        test_native="import _timer_calls\n\n\ndef test_native():\n    assert _timer_calls\n",
        test_python="def test_python():\n    assert sum([1, 2]) == 3\n",
    )
    pytester.makeini("[pytest]\npythonpath = .\n")
    result = pytester.runpytest_subprocess("--profile-save-baseline", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    code_map = load(pytester.path / "baselines" / FILE_NAME)
    assert code_map is not None and list(code_map.compiled) == [compiled.name]
    tree = working_tree(pytester.path)
    nodeids = ["test_native.py::test_native", "test_python.py::test_python"]
    assert [why_measured(code_map, n, [tree]) for n in nodeids] == [None, None]
    compiled.write_bytes(compiled.read_bytes() + b"\0")  # rebuilt
    tree = working_tree(pytester.path)
    reasons = [why_measured(code_map, n, [tree]) for n in nodeids]
    assert all(r and f"compiled module {compiled.name} changed" in r for r in reasons), reasons
    # Removed (renamed, no longer built): a later save drops it, or it would measure every
    # test ever after; the merged map otherwise keeps what runs of fewer tests did not import.
    compiled.unlink()
    (pytester.path / "test_native.py").unlink()
    result = pytester.runpytest_subprocess("--profile-save-baseline", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    code_map = load(pytester.path / "baselines" / FILE_NAME)
    assert code_map is not None and code_map.compiled == {}
