"""Values written as a person writes them: durations ("2 s", "500 ms"), fractions ("10%", 0.1).
Used by the perf_budget marker and the options; a value that cannot be read raises ValueError
with a message that gives the accepted form."""

from __future__ import annotations

import math
import re

_DURATION_UNITS = {"": 1.0, "s": 1.0, "sec": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "min": 60.0}
_NUMBER_UNIT = re.compile(
    r"^\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-zµ%]*)\s*$"
)


def parse_duration(text: str) -> float:
    """'2 s', '500 ms', '0.01', '1.5sec' -> seconds (finite, >= 0)."""
    match = _NUMBER_UNIT.match(text)
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _DURATION_UNITS:
        raise ValueError(
            f"expected a duration such as '2 s', '500 ms' or a number of seconds, got {text!r}"
        )
    value = float(match.group(1)) * _DURATION_UNITS[unit]
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"expected a duration >= 0 such as '2 s', got {text!r}")
    return value


def parse_fraction(text: str) -> float:
    """'10%', '+10 %', '0.1' -> 0.1 (finite, >= 0)."""
    match = _NUMBER_UNIT.match(text)
    unit = match.group(2) if match else ""
    if match is None or unit not in ("", "%"):
        raise ValueError(
            f"expected a fraction such as 0.1 or a percentage such as 10%, got {text!r}"
        )
    value = float(match.group(1)) / (100.0 if unit == "%" else 1.0)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"expected a fraction >= 0 such as 0.1 or 10%, got {text!r}")
    return value
