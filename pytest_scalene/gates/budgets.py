"""`@pytest.mark.perf_budget(...)`: parsing the marker's limits and checking a profile against them.

Marks on the test, its class and its module combine, the closest one winning per keyword. Every
argument is validated, including those a closer mark overrides, so a typo never hides.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest

from ..core import extra_keys
from ..core.model import PER_CALL_EXTRA, TestProfile
from ..core.natural_values import (
    BudgetError,
    finite_number,
    number_or_zero,
    parse_duration,
    parse_size,
)
from ..core.runenv import MARKER
from ..core.verdict import BUDGET, Verdict
from .metrics import METRICS, Availability, Metric, missing_reason, top_line, where

KEYWORDS = (*METRICS, "regression")


@dataclass(frozen=True)
class Budget:
    limits: dict[str, float | bool] = field(default_factory=dict)  # leaks: bool, others: max
    regression: float | None = None  # allowed growth over the baseline, as a fraction

    def with_defaults(self, defaults: Budget) -> Budget:
        """--profile-budget's limits, for every profiled test whose markers do not set them."""
        if not defaults.limits:
            return self
        return Budget({**defaults.limits, **self.limits}, self.regression)


_COUNT = r"^\s*((?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*([kKMG]?)\s*$"  # compiled at first use
_COUNT_UNITS = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9}


NO_BUDGET = Budget()  # a test without perf_budget markers
BUDGET_KEY = pytest.StashKey[Budget]()  # the test's markers, read before its call


def budget_of(item: pytest.Item) -> Budget:
    return item.stash.get(BUDGET_KEY, NO_BUDGET)


def parse_count(text: str, what: str) -> float:
    """'25M', '1.5 G', '800k', '2e6' -> a count."""
    match = re.match(_COUNT, text)
    if match is None:
        raise BudgetError(f"{what}: expected a count such as 25_000_000, '25M' or '1.5G'")
    return finite_number(float(match.group(1)) * _COUNT_UNITS[match.group(2)], what)


def parse_value(name: str, value: Any) -> float | bool:
    """One marker keyword's value, validated; raises BudgetError naming the argument."""
    what = f"{name}={value!r}"
    if name == "leaks":
        if not isinstance(value, bool):
            raise BudgetError(f"{what}: expected True (leaks allowed) or False (fail on a leak)")
        return value
    if name == "regression" and isinstance(value, str) and value.strip().endswith("%"):
        return finite_number(_percent(value, what), what) / 100.0
    metric = METRICS.get(name)
    if metric is not None and metric.size and isinstance(value, str):
        return parse_size(value, what, rate=metric.unit == "MB/s")
    if metric is not None and metric.unit == "instructions" and isinstance(value, str):
        return parse_count(value, what)
    if metric is not None and metric.unit == "s" and isinstance(value, str):
        try:
            return parse_duration(value)  # cpu_s="2 s", "500 ms"
        except ValueError as exc:
            raise BudgetError(f"{what}: {exc}") from None
    number = finite_number(value, what)
    if name == "python_fraction" and number > 1:
        raise BudgetError(f"{what}: expected a fraction of CPU time between 0 and 1")
    return number


_TRUTH = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}


def parse_defaults(entries: Iterable[tuple[str, str]]) -> Budget:
    """--profile-budget's KEYWORD=VALUE pairs (regression left out: the options read it), with
    the marker's keywords and rules; the last of a keyword wins. Raises BudgetError."""
    limits: dict[str, float | bool] = {}
    for name, text in entries:
        where = f"--profile-budget {name}={text}"
        if name not in KEYWORDS:
            raise BudgetError(f"{where}: {_unknown(name)}")
        value = _TRUTH.get(text.lower(), text) if name == "leaks" else _number_or_text(text)
        try:
            limits[name] = parse_value(name, value)
        except BudgetError as exc:
            raise BudgetError(f"{where}: {exc}") from None
    return Budget(limits)


def _number_or_text(text: str) -> float | str:
    """A plain number as the marker gets it; a size, a duration or a count as text, which
    parse_value reads with its unit."""
    try:
        return float(text)
    except ValueError:
        return text


def _percent(text: str, what: str) -> float:
    try:
        return float(text.strip()[:-1])
    except ValueError:
        raise BudgetError(f"{what}: expected a fraction such as 0.1 or '10%'") from None


def _unknown(name: str) -> str:
    close = difflib.get_close_matches(name, KEYWORDS, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown keyword {name!r}{hint}; known keywords: {', '.join(KEYWORDS)}"


def parse_marks(marks: Iterable[tuple[str, Any]]) -> Budget:
    """Combine perf_budget marks given closest first as (where, Mark); the closest value wins."""
    limits: dict[str, float | bool] = {}
    regression: float | None = None
    seen: set[str] = set()
    for origin, mark in marks:
        prefix = f"invalid {MARKER} marker on {origin}"
        if mark.args:
            raise BudgetError(
                f"{prefix}: it takes keyword arguments only, got positional "
                f"{', '.join(repr(a) for a in mark.args)} (e.g. {MARKER}(cpu_s=2.0, peak_mb=200))"
            )
        for name, raw in mark.kwargs.items():
            if name not in KEYWORDS:
                raise BudgetError(f"{prefix}: {_unknown(name)}")
            try:
                value = parse_value(name, raw)
            except BudgetError as exc:
                raise BudgetError(f"{prefix}: {exc}") from None
            if name in seen:
                continue  # a closer mark already set it
            seen.add(name)
            if name == "regression":
                regression = float(value)
            else:
                limits[name] = value
    return Budget(limits, regression)


def _leak_result(profile: TestProfile, count: int) -> Verdict:
    if count == 0:
        return Verdict(BUDGET, "leaks", False, 0.0, True, "no leak detected (budget leaks=False)")
    leaks = [leak for leak in profile.extra.get(extra_keys.LEAKS, []) if isinstance(leak, dict)]
    detail = ""
    if leaks:
        worst = max(leaks, key=lambda leak: _num(leak.get("probability")))
        place = (worst.get("file"), worst.get("line"))
        function = next((k.function for k in profile.lines if (k.file, k.line) == place), "")
        at = f"{place[0]}:{place[1]}" + (f" {function}" if function else "")
        detail = (
            f" ({at}: probability {_num(worst.get('probability')):.2f}, "
            f"{_num(worst.get('rate_mb_s')):.1f} MB/s)"
        )
    noun = "leak" if count == 1 else "leaks"
    message = f"{count} {noun} detected, budget leaks=False{detail}"
    return Verdict(BUDGET, "leaks", False, float(count), False, message)


_num = number_or_zero


def _check_one(
    metric: Metric, limit: float | bool, profile: TestProfile, why: Availability
) -> Verdict:
    value = metric.of_test(profile)
    if value is None:
        reason = missing_reason(metric, profile, why)
        message = f"{metric.name} budget cannot be checked: {reason}"
        return Verdict(BUDGET, metric.name, limit, None, False, message)
    if metric.name == "leaks":
        return _leak_result(profile, round(value))
    assert not isinstance(limit, bool)
    label = metric.label
    if profile.calls and (metric.name in PER_CALL_EXTRA or metric.unit == "s"):
        label += " per call"  # a benchmark test's (benchmark/calls.py)
    if value <= limit:
        message = f"{label} {metric.format(value)} <= budget {metric.format_limit(limit)}"
        return Verdict(BUDGET, metric.name, limit, value, True, message)
    message = f"{label} {metric.format(value)} > budget {metric.format_limit(limit)}"
    top = top_line(profile, metric)
    line = where(top[0]) if top else None
    if top:
        message += f" ({line}: {metric.format_line(top[1])})"
    return Verdict(BUDGET, metric.name, limit, value, False, message, line)


def check(budget: Budget, profile: TestProfile, why: Availability) -> list[Verdict]:
    """One result per limit of the budget, in the order of gates.METRICS. A limit that cannot
    be checked because its metric was not measured is a failure that says why."""
    return [
        _check_one(metric, budget.limits[name], profile, why)
        for name, metric in METRICS.items()
        # leaks=True allows leaks: nothing to check, nothing to measure
        if name in budget.limits and budget.limits[name] is not True
    ]
