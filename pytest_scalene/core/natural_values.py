"""Values written as a person writes them: durations ("2 s", "500 ms"), fractions ("10%", 0.1),
sizes ("200 MB"), and the one test of "is this a real number". Used by the perf_budget marker,
the options and every reader of stored figures; a value that cannot be read raises ValueError
(BudgetError for sizes and numbers) with a message that gives the accepted form."""

from __future__ import annotations

import math
import re
from typing import Any

_DURATION_UNITS = {"": 1.0, "s": 1.0, "sec": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "min": 60.0}
# The patterns are compiled at their first use (re's own cache), not at import: most sessions
# parse no such value, and compiling both cost every pytest session with the plugin ~1 ms.
_NUMBER_UNIT = r"^\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-zµ%]*)\s*$"


class BudgetError(ValueError):
    """A perf_budget marker argument or option value that cannot be used; the message names
    it (raised by the parsers here and in gates/budgets.py)."""


def is_number(value: Any) -> bool:
    """An int or a float, not a bool (True is an int to Python, not a figure)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def number_or_zero(value: Any) -> float:
    """`value` as a float when is_number(value), else 0.0 (inlined: the reports call it per
    figure)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def float_or_none(value: Any) -> float | None:
    """`value` as a float when is_number(value), else None (inlined, as number_or_zero)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def finite_number(value: Any, what: str) -> float:
    """`value` as a finite, non-negative float; BudgetError naming `what` otherwise."""
    if not is_number(value):
        raise BudgetError(f"{what}: expected a number")
    try:
        number = float(value)
    except OverflowError:  # an int beyond float's range
        number = math.inf
    if math.isnan(number) or math.isinf(number):
        raise BudgetError(f"{what}: expected a finite number")
    if number < 0:
        raise BudgetError(f"{what}: must not be negative")
    return number


def parse_size(text: str, what: str, rate: bool = False) -> float:
    """'200 MB', '1.5 GB', '512 MiB' (and '50 MB/s' for a rate) -> MB."""
    example = "'50 MB/s'" if rate else "'200 MB'"
    match = re.match(_SIZE, text)
    unit = match.group(2).lower() if match else ""
    if match is not None and not unit:
        raise BudgetError(
            f"{what}: a size given as text needs a unit, such as {example} "
            f"(or give the number {match.group(1)} for MB{'/s' if rate else ''})"
        )
    if match is None or unit not in _SIZE_UNITS or (match.group(3) and not rate):
        raise BudgetError(
            f"{what}: expected a number of MB or a size such as {example} "
            "(units: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)"
        )
    finite_number(float(match.group(1)), what)  # the number as written: negative, NaN
    return finite_number(float(match.group(1)) * _SIZE_UNITS[unit], what)  # '1e308 TB' overflows


# Sizes are in MB of 2**20 bytes, as every report of this plugin (and Scalene) counts them, so
# "MB" and "MiB" are the same unit here.
_SIZE_UNITS = {
    "b": 1 / 2**20,
    "kb": 1 / 2**10,
    "kib": 1 / 2**10,
    "mb": 1.0,
    "mib": 1.0,
    "gb": 2.0**10,
    "gib": 2.0**10,
    "tb": 2.0**20,
    "tib": 2.0**20,
}
_SIZE = r"^\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z]*)\s*(/\s*s)?\s*$"


def parse_duration(text: str) -> float:
    """'2 s', '500 ms', '0.01', '1.5sec' -> seconds (finite, >= 0)."""
    match = re.match(_NUMBER_UNIT, text)
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
    match = re.match(_NUMBER_UNIT, text)
    unit = match.group(2) if match else ""
    if match is None or unit not in ("", "%"):
        raise ValueError(
            f"expected a fraction such as 0.1 or a percentage such as 10%, got {text!r}"
        )
    value = float(match.group(1)) / (100.0 if unit == "%" else 1.0)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"expected a fraction >= 0 such as 0.1 or 10%, got {text!r}")
    return value


def format_seconds(value: float) -> str:
    """'1.25 s', and for under 10 ms (a call of a benchmarked function) '2.41 ms', '310 us'."""
    if value == 0 or abs(value) >= 0.01:
        return f"{value:.2f} s"
    if abs(value) >= 1e-4:
        return f"{value * 1e3:.2f} ms"
    return f"{value * 1e6:.3g} us"


def format_megabytes(value: float) -> str:
    """'12.5 MB', and under 0.05 MB (a benchmarked function's bytes per call) '3.2 KB', '96 B'."""
    if value == 0 or abs(value) >= 0.05:
        return f"{value:.1f} MB"
    if abs(value) * 2**20 >= 1024:
        return f"{value * 1024:.1f} KB"
    return f"{value * 2**20:.0f} B"
