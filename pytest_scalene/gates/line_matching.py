"""Pairing a test's lines in a run with its lines in the baseline, across edits: by file,
function and source text first, then by offset in the function (gates/comparison.py)."""

from __future__ import annotations

from .baseline_store import LineEntry


def match_lines(
    baseline: tuple[LineEntry, ...], current: tuple[LineEntry, ...]
) -> tuple[list[tuple[LineEntry, LineEntry]], int, list[LineEntry], list[LineEntry]]:
    """Pair each current line with a baseline line: same file, function and source text first
    (nearest offset among equal texts), then, for edited lines, same file, function and offset.
    Returns (pairs of (baseline, current), how many paired by offset, new lines, vanished)."""
    free = list(range(len(baseline)))
    pairs: list[tuple[LineEntry, LineEntry]] = []
    unpaired: list[LineEntry] = []
    for cur in current:
        same = [i for i in free if same_place(baseline[i], cur) and baseline[i].text == cur.text]
        if same:
            best = min(same, key=lambda i: abs(baseline[i].offset - cur.offset))
            free.remove(best)
            pairs.append((baseline[best], cur))
        else:
            unpaired.append(cur)
    new: list[LineEntry] = []
    by_offset = 0
    for cur in unpaired:
        same = [
            i for i in free if same_place(baseline[i], cur) and baseline[i].offset == cur.offset
        ]
        if same:
            free.remove(same[0])
            pairs.append((baseline[same[0]], cur))
            by_offset += 1
        else:
            new.append(cur)
    return pairs, by_offset, new, [baseline[i] for i in free]


def same_place(a: LineEntry, b: LineEntry) -> bool:
    return a.file == b.file and a.function == b.function


def where(entry: LineEntry) -> str:
    return f"{entry.file}:{entry.line} {entry.function}"
