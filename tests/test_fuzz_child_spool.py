"""Fuzzing the files children spool for --profile-subprocesses (child_profiles._merge): any file
content, a torn write or a wrongly typed field, becomes a note naming the file; it never raises
into the test's hooks, and a good child's profile beside it is still charged to the test."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from pytest_scalene.core.model import LineKey, TestProfile
from pytest_scalene.subprocesses.child_profiles import ChildProfiles

GOOD = {
    "profile": {
        "cpu_python_s": 0.5,
        "lines": [{"file": "child.py", "line": 3, "function": "work", "cpu_python_s": 0.5}],
    },
    "notes": [],
}
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=10,
)
# Near misses of a child's file: its fields present, their values anything.
line_like = st.fixed_dictionaries(
    {},
    optional={
        k: json_values
        for k in ("file", "line", "function", "function_line", "cpu_python_s", "samples")
    },
)
profile_like = st.fixed_dictionaries(
    {},
    optional={
        "cpu_python_s": json_values,
        "elapsed_s": json_values,
        "outcome": json_values,
        "lines": st.lists(line_like | json_values, max_size=3) | json_values,
    },
)
contents = (
    json_values.map(json.dumps)
    | st.fixed_dictionaries({"profile": profile_like}, optional={"notes": json_values}).map(
        json.dumps
    )
    | st.integers(0, len(json.dumps(GOOD))).map(lambda n: json.dumps(GOOD)[:n])  # torn writes
    | st.text(max_size=20)
)


class _Profiler:
    def __init__(self) -> None:
        self.notes: list[str] = []

    def note(self, message: str) -> None:
        self.notes.append(message)


# Found a bug: a figure of the wrong type ({"profile": {"cpu_python_s": null}}) raised in
# merge_child, past _merge's try, so the children after it were not merged (fixed).
@settings(max_examples=200, deadline=None)
@given(st.lists(contents, min_size=1, max_size=3))
@example(bad=['{"profile": {"cpu_python_s": null}}'])
def test_bad_spool_files_become_notes_and_good_ones_still_merge(bad: list[str]) -> None:
    collector = ChildProfiles.__new__(ChildProfiles)  # no spool root, no environment changes
    collector.profiler = profiler = _Profiler()
    with tempfile.TemporaryDirectory() as spool:
        for i, text in enumerate(bad):
            Path(spool, f"a{i}.json").write_text(text, encoding="utf-8")
        Path(spool, "z_good.json").write_text(json.dumps(GOOD), encoding="utf-8")
        profile = TestProfile("test_x.py::test_x")
        collector._merge(Path(spool), profile)
    assert LineKey("child.py", 3, "work") in profile.lines, profiler.notes
    assert profile.extra["children"] >= 1
    for note in profiler.notes:
        assert isinstance(note, str)


def test_torn_write_is_a_note_naming_the_file(tmp_path: Path) -> None:
    collector = ChildProfiles.__new__(ChildProfiles)
    collector.profiler = profiler = _Profiler()
    (tmp_path / "a.json").write_text(json.dumps(GOOD)[:25], encoding="utf-8")
    profile = TestProfile("test_x.py::test_x")
    collector._merge(tmp_path, profile)
    assert profile.lines == {} and "children" not in profile.extra
    assert len(profiler.notes) == 1 and "a.json was unreadable" in profiler.notes[0]
