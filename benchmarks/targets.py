"""The issue's targets, each measured against the results: (target, measured, pass?, why)."""

from __future__ import annotations

from typing import Any


def ratio(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}x"


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("pass" if ok else "**MISSED**")


# Issue 28's: full mode within 1.10x at the median, 1.20x on the worst workload.
TARGET_CPU, TARGET_FULL, TARGET_FULL_WORST = 1.05, 1.10, 1.20
TARGET_MEMORY_PCT, TARGET_SPLIT, TARGET_BIAS = 2.0, 10, 10


Target = tuple[str, str, bool | None, str]  # (target, measured, passed, why not measured)


def _at_most(limit: float, value: float | None) -> bool | None:
    return None if value is None else value <= limit


def _overhead(results: dict[str, Any]) -> list[Target]:
    summary = results["overhead"]["summary"]

    def get(key: str, stat: str) -> float | None:
        return summary.get(key, {}).get(stat)

    cpu, full = get("ours_cpu", "median_wall"), get("ours_full", "median_wall")
    worst, scalene = get("ours_full", "worst_wall"), get("scalene_full", "median_wall")
    return [
        (f"CPU-only overhead, median over the workloads <= {TARGET_CPU}x",
         f"{ratio(cpu)} (worst {ratio(get('ours_cpu', 'worst_wall'))})",
         _at_most(TARGET_CPU, cpu), ""),
        (f"full overhead (CPU + memory + copy), median <= {TARGET_FULL}x", ratio(full),
         _at_most(TARGET_FULL, full), ""),
        (f"full overhead, worst workload <= {TARGET_FULL_WORST:g}x", ratio(worst),
         _at_most(TARGET_FULL_WORST, worst), ""),
        ("full overhead median below Scalene full's (same run)",
         f"{ratio(full)} vs {ratio(scalene)}",
         None if full is None or scalene is None else full < scalene,
         "" if scalene is not None else "Scalene did not run"),
    ]  # fmt: skip


def _worst(name: str, errors: list[float], limit: float, unit: str, why: str = "") -> Target:
    if not errors:
        return (name, "not measured", None, why)
    return (name, f"worst {max(errors):.1f}{unit}", max(errors) <= limit, "")


def targets(results: dict[str, Any]) -> list[Target]:
    """Each of the issue's targets, measured against these results."""
    acc = results["accuracy"]
    touch = acc["touch"]["tools"].get("ours_full", {})
    touch_errors = [e for e in touch.get("error_pct", []) if e is not None]
    if len(touch_errors) < len(acc["touch"]["fractions"]):
        touch_errors = []  # a fraction that was not measured is not a pass
    cases = acc["split"]["tools"].get("ours_cpu", {}).get("cases", {}).values()
    points = [p["reported"].get("ours_cpu", {}) for p in acc["bias"]["points"]]
    return _overhead(results) + [
        _worst(f"512 MiB peak within {TARGET_MEMORY_PCT:g}% at every fraction touched",
               touch_errors, TARGET_MEMORY_PCT, "%", touch.get("why", "")),
        _worst(f"Python/native split within {TARGET_SPLIT} points of ground truth",
               [c["error_points"] for c in cases if c["error_points"] is not None],
               TARGET_SPLIT, " points"),
        _worst(f"function bias within {TARGET_BIAS} points of the true share (10%..90%)",
               [abs(p["error_points"]) for p in points if "error_points" in p],
               TARGET_BIAS, " points"),
    ]  # fmt: skip
