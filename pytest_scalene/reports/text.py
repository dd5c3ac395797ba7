"""Text that fits a terminal's width, shared by the terminal report (terminal_report.py) and its
summary (terminal_summary.py): columns counted as the terminal counts them, ids and paths shortened
in the middle, and lines wrapped between phrases, never inside a figure."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Any

WIDTH = 100  # the widest report: wider terminals get 100 columns too, for a report that reads
MIN_WIDTH = 60  # the narrowest: a line table's figures alone take about 60 columns
INDENT = "  "
PHRASE = "  "  # figures and clauses are joined by two spaces: lines break there first
_GLUE = "\u00a0"  # a no-break space: textwrap's whitespace is ASCII only, and so is ours
# A space before a figure ("cpu 0.09", "of 1", "(+110%"), before a figure's unit ("0.09 s") or
# before a comparison with a figure: a line never breaks there, so that a label and its figure,
# and two figures compared, stay on one row.
_FIGURE_SPACE = re.compile(
    r" (?=[(+\-~]?\d)|(?<=\d) (?=(?:s|ms|µs|ns|MB|GB|KB|kB|M|%|MB/s)(?:\W|$))"
    r"| (?=(?:vs|->|[<>]=?) [(+\-~]?\d)"  # and a comparison of two: "0.17 s -> 0.26 s"
)
# A line and its function ("etl/load.py:9 load_frame") are one place: no break between them.
_AT_LINE = re.compile(r"(\S:\d+) (?=[A-Za-z_<])")
_CODE = re.compile(r"`[^`]*`")
# A clause ends at a punctuation mark and a space, unless a figure follows ("work: 0.02 s").
_CLAUSE = re.compile(r"(?<=[:;,.]) (?![(+\-~]?\d)")


def terminal_width(config: Any) -> int:
    """Columns for the report: the terminal's (pytest's own, so COLUMNS is honoured; 80 when
    the output is not a terminal, as in CI logs) between MIN_WIDTH and WIDTH."""
    try:
        full = int(config.get_terminal_writer().fullwidth)
    except Exception:  # a config without a terminal writer (a plugin replaced the reporter)
        return WIDTH
    return max(MIN_WIDTH, min(WIDTH, full))


def display_width(text: str) -> int:
    """Terminal columns `text` takes: East Asian wide characters take two, combining marks none."""
    if text.isascii():  # most text: one column a character
        return len(text)
    width = 0
    for char in text:
        if unicodedata.combining(char):
            continue
        width += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return width


def _take(chars: Any, width: int) -> str:
    """The leading `chars` that fit `width` columns."""
    out: list[str] = []
    used = 0
    for char in chars:
        w = display_width(char)
        if used + w > width:
            break
        out.append(char)
        used += w
    return "".join(out)


def fit(text: str, width: int, keep_end: bool = False) -> str:
    """`text` cut to `width` columns with an ellipsis (at the start when `keep_end`)."""
    if display_width(text) <= width:
        return text
    if width <= 0:
        return ""
    if keep_end:
        return "…" + _take(reversed(text), width - 1)[::-1]
    return _take(text, width - 1) + "…"


def shorten(text: str, width: int, tail_share: float = 2 / 3) -> str:
    """`text` cut in the middle to `width` columns, `tail_share` of them kept from its end: a
    path keeps its top directory and, first, its file name."""
    if display_width(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    tail = _take(reversed(text), int(tail_share * (width - 1)))[::-1]
    head = _take(text, width - 1 - display_width(tail))
    return head + "…" + tail


def shorten_id(nodeid: str, width: int) -> str:
    """A test id cut to `width` columns in the middle of its path, its name and its parameters,
    each keeping its start and end: the file name, the test's name and the parameters' first
    and last values are what tell tests apart."""
    if display_width(nodeid) <= width:
        return nodeid
    path, sep, test = nodeid.partition("::")
    if not sep:
        return shorten(nodeid, width)
    room = width - len(sep)
    path_room = min(display_width(path), max(room - display_width(test), room // 3))
    cut = test.find("[")
    name, params = (test[:cut], test[cut:]) if cut > 0 else (test, "")
    room -= path_room
    params_room = min(display_width(params), max(room - display_width(name), room // 2))
    return (
        shorten(path, path_room)
        + sep
        + shorten(name, room - params_room, tail_share=0.5)
        + shorten(params, params_room, tail_share=0.5)
    )


def pad(text: str, width: int, right: bool) -> str:
    gap = " " * max(0, width - display_width(text))
    return gap + text if right else text + gap


def _words(phrase: str) -> list[str]:
    glued = _AT_LINE.sub(r"\1" + _GLUE, _FIGURE_SPACE.sub(_GLUE, phrase))
    return [w.replace(_GLUE, " ") for w in glued.split(" ") if w]


def _glue_code(text: str) -> str:
    """Source text in backticks (`total += i * i % 7`) is one word: never split over lines."""
    return _CODE.sub(lambda m: m.group(0).replace(" ", _GLUE), text)


def _clauses(text: str | Sequence[str]) -> list[tuple[str, int, str]]:
    """(joint before it, the width of the phrase it starts or 0, clause): a string's phrases
    are its parts joined by two spaces, a sequence's its items, joined by one; a phrase's
    clauses end at a punctuation mark and a space (not one before a figure: "work: 0.02 s")."""
    phrases, joint = (text.split(PHRASE), PHRASE) if isinstance(text, str) else (text, " ")
    out: list[tuple[str, int, str]] = []
    for phrase in (_glue_code(p.strip()) for p in phrases):
        if phrase:
            clauses = _CLAUSE.split(phrase)
            out.append((joint, display_width(phrase), clauses[0]))
            out += [(" ", 0, c) for c in clauses[1:]]
    return out


def wrap(text: str | Sequence[str], width: int, first: str = "", rest: str = "") -> list[str]:
    """`text` in lines of at most `width` columns, the first starting with `first`, the others
    with `rest`. A line breaks before a phrase that does not fit it but fits a line of its own;
    then, once the line is a quarter full, before a clause (from a punctuation mark) that does
    not fit it but fits a line; else between words, never between a figure and its label or
    unit ("cpu 0.09 s"). A word longer than a line (a path) is cut in the middle."""
    lines: list[str] = []
    line = first
    empty = True  # nothing but the indent on `line` yet
    room = max(1, width - display_width(rest))  # a fresh line's columns
    for joint, phrase, clause in _clauses(text):
        used = display_width(line) + len(joint)
        if not empty and (
            (phrase and used + phrase > width and phrase <= room)
            or (used + display_width(clause) > width <= 4 * used and display_width(clause) <= room)
        ):
            lines.append(line)
            line, empty = rest, True
        for index, word in enumerate(_words(clause)):
            sep = ("" if empty else joint) if index == 0 else " "
            if not empty and display_width(line) + len(sep) + display_width(word) > width:
                lines.append(line)
                line, empty, sep = rest, True, ""
            line += sep + shorten(word, max(1, width - display_width(line) - len(sep)))
            empty = False
    lines.append(line.rstrip() if empty else line)
    return lines
