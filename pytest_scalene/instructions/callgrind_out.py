"""Reading callgrind's output: one dump per counted test, with per-function costs.

Format: https://valgrind.org/docs/manual/cl-format.html. Only what the counts need is read:
`fn=`/`cfn=` with name compression, `calls=` lines (the cost line after one is the inclusive
cost of that call), cost lines, and `totals:`/`summary:`. The event is `Ir` (instructions).
Python functions on 3.12+ appear as the addresses of their perf trampolines; the interpreter's
perf map (/tmp/perf-PID.map) names them (`py::qualname:filename`). Callgrind separates the
activations of a function already active on the stack (`--separate-recs`, default 2) as
`NAME'2`: only the outermost activation, `NAME`, is read, whose inclusive cost holds the deeper
ones (each `'2` activation's inclusive cost counted again would put a recursive function's
count above its test's).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

_NAMED = re.compile(r"^\((\d+)\)(?: (.*))?$")
_ADDRESS = re.compile(r"^0x([0-9a-fA-F]+)$")
_RECURSION = re.compile(r"'\d+$")  # NAME'2: a deeper activation of a function already active
PYTHON_PREFIX = "py::"


@dataclass
class Dump:
    label: str  # the client request's label: "Client Request: <label>"
    total: int
    self_cost: dict[str, int] = field(default_factory=dict)
    inclusive: dict[str, int] = field(default_factory=dict)  # self + the calls it makes


def _name(value: str, names: dict[str, str]) -> str:
    match = _NAMED.match(value)
    if match is None:
        return value
    ident, text = match.groups()
    if text is not None:
        names[ident] = text
        return text
    return names.get(ident, f"({ident})")


def _cost(fields: list[str]) -> int:
    # "<position> <Ir>"; a cost line with no event column costs 0
    return int(fields[1]) if len(fields) > 1 else 0


def parse(path: str | Path) -> Dump:
    """One dump file. Raises ValueError when it is not a callgrind dump."""
    label = ""
    total: int | None = None
    summed = 0
    self_cost: dict[str, int] = {}
    call_cost: dict[str, int] = {}
    names: dict[str, str] = {}
    current = ""
    after_calls = False
    with open(path, encoding="utf-8", errors="replace") as lines:
        first = lines.readline()
        if not first.startswith(("# callgrind format", "version:")):
            raise ValueError(f"{path}: not a callgrind output file")
        for raw in lines:
            line = raw.rstrip("\n")
            if not line:
                continue
            head = line[0]
            if head.isdigit() or head in "+-*":
                cost = _cost(line.split())
                if after_calls:
                    call_cost[current] = call_cost.get(current, 0) + cost
                    after_calls = False
                else:
                    self_cost[current] = self_cost.get(current, 0) + cost
                    summed += cost
            elif line.startswith("fn="):
                current = _name(line[3:], names)
            elif line.startswith("cfn="):
                _name(line[4:], names)  # defines a compressed name used later
            elif line.startswith("calls="):
                after_calls = True
            elif line.startswith("desc: Trigger: Client Request: "):
                label = line.split("Client Request: ", 1)[1]
            elif line.startswith(("totals:", "summary:")):
                value = int(line.split(":", 1)[1].split()[0] or 0)
                if value or total is None:
                    total = value if value else total
    inclusive = {
        fn: self_cost.get(fn, 0) + call_cost.get(fn, 0) for fn in self_cost.keys() | call_cost
    }
    return Dump(label, total if total else summed, self_cost, inclusive)


def read_perf_map(path: str | Path) -> list[tuple[int, int, str]]:
    """(start, size, name) of each trampoline in a perf map; [] when there is none."""
    entries = []
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    for line in text.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[2].startswith(PYTHON_PREFIX):
            try:
                entries.append((int(parts[0], 16), int(parts[1], 16), parts[2]))
            except ValueError:
                continue
    return entries


def python_functions(dump: Dump, perf_map: list[tuple[int, int, str]]) -> dict[str, int]:
    """Inclusive instructions per Python function ("qualname:filename"), from the trampolines'
    addresses in the dump: the function with all it calls, over its outermost activations only
    (a recursion is counted once). Two trampolines of one function (a code object re-created)
    add up."""
    by_start = {start: name for start, _size, name in perf_map}
    found: dict[str, int] = {}
    for fn, cost in dump.inclusive.items():
        if _RECURSION.search(fn):
            continue
        match = _ADDRESS.match(fn.split("'", 1)[0])
        name = by_start.get(int(match.group(1), 16)) if match else None
        if name is not None and cost > 0:
            key = name[len(PYTHON_PREFIX) :]
            found[key] = found.get(key, 0) + cost
    return found
