"""The closing note of docs/benchmarks.md: for each target missed, why, from the run's own
numbers, and what would fix it."""

from __future__ import annotations

import statistics
from typing import Any

from targets import TARGET_CPU, TARGET_FULL, Target

SUITE_TESTS = 50


def _startup(results: dict[str, Any]) -> dict[str, float]:
    """Median wall seconds of the empty-test session per tool ({} when not measured)."""
    per = results.get("startup", {}).get("per_workload", {}).get("startup", {})
    return {key: m["wall_s"] for key, m in per.items() if m.get("wall_s") is not None}


def _base_median(results: dict[str, Any]) -> float | None:
    walls = [w["base"].get("wall_s") for w in results["overhead"]["per_workload"].values()]
    walls = [w for w in walls if w]
    return statistics.median(walls) if walls else None


def _without_fixed_cost(results: dict[str, Any], key: str, cost_s: float) -> float | None:
    """The median ratio over the workloads had `key` cost `cost_s` less per session."""
    ratios = []
    for by_tool in results["overhead"]["per_workload"].values():
        base, tool = by_tool["base"].get("wall_s"), by_tool.get(key, {}).get("wall_s")
        if base and tool:
            ratios.append((tool - cost_s) / base)
    return statistics.median(ratios) if ratios else None


def _noise(results: dict[str, Any], key: str, limit: float) -> str:
    cpu = results["overhead"]["summary"].get(key, {}).get("median_cpu")
    load = max(results["overhead"]["raw"]["load_average_per_round"], default=0.0)
    text = f" The load average reached {load:g} on {results['machine']['cores']} cores during it."
    if cpu is not None and cpu <= limit:
        text += (
            f" The CPU-time ratio of the same runs, {cpu:.2f}x, is within the target: part of "
            "the wall-clock excess is other work on the machine, not the profiler."
        )
    return text


def _full(results: dict[str, Any]) -> str:
    start = _startup(results)
    text = "**Full profiling overhead.**"
    if {"base", "ours_full", "ours_full_preloaded"} <= start.keys():
        reexec = start["ours_full"] - start["ours_full_preloaded"]
        fixed = start["ours_full"] - start["base"]
        estimate = _without_fixed_cost(results, "ours_full", reexec)
        text += (
            f" Most of it is a fixed cost per pytest session, not per sample: an empty test "
            f"takes {start['base']:.2f} s unprofiled and {start['ours_full']:.2f} s under "
            f"`--profile` (+{fixed:.2f} s), but {start['ours_full_preloaded']:.2f} s when the "
            f"allocator shim is already on LD_PRELOAD. The difference, {reexec:.2f} s, is the "
            "re-exec: `preload.prepare` runs in `pytest_load_initial_conftests`, after the "
            "interpreter has imported pytest and its plugins and parsed the command line, and "
            "then `os.execve` starts all of that again with the shim preloaded."
        )
        base = _base_median(results)
        if base:
            text += f" That is {100 * reexec / base:.0f}% of the median workload ({base:.2f} s)."
        if estimate is not None:
            text += (
                f" Without it the median over the workloads would be about {estimate:.2f}x."
                if estimate >= 1
                else " Without it the median would be within this run's noise of 1x."
            )
    text += (
        " What would fix it: re-execute before pytest is imported: a `pytest-scalene` launcher "
        "(or a `.pth` hook that looks for `--profile` in `sys.argv` at interpreter start) that "
        "execs `python -m pytest` with LD_PRELOAD set costs one bare interpreter start "
        "(~20 ms) instead of a second pytest start-up; CI jobs can export LD_PRELOAD "
        "themselves today, which the plugin already accepts (no re-exec when the shim is "
        "loaded)."
    )
    return text + _noise(results, "ours_full", TARGET_FULL)


def _cpu(results: dict[str, Any]) -> str:
    start = _startup(results)
    text = "**CPU-only overhead.**"
    if {"base", "ours_cpu"} <= start.keys():
        text += (
            f" The fixed cost per session (an empty test) is "
            f"{start['ours_cpu'] - start['base']:+.2f} s."
        )
    suite = results["overhead"]["per_workload"].get("suite", {})
    base, ours = suite.get("base", {}).get("wall_s"), suite.get("ours_cpu", {})
    if base and ours.get("wall") and ours.get("cpu"):
        per_test = [1000 * (ours[k] - 1) * base / SUITE_TESTS for k in ("wall", "cpu")]
        text += (
            f" On the {SUITE_TESTS}-test suite it costs {per_test[0]:+.1f} ms per test in "
            f"wall time, {per_test[1]:+.1f} ms in CPU time (the paired ratios times the "
            "unprofiled time)."
        )
    text += (
        " Where the ratio is steady over repeated runs, what would fix it is less work per "
        "sample (the handler reads every thread's clock and locates the main frame at each "
        "signal) or a longer `--profile-interval`; a single run's miss on a loaded machine "
        "is first of all noise: rerun on an idle one."
    )
    return text + _noise(results, "ours_cpu", TARGET_CPU)


def _accuracy(name: str, measured: str) -> str:
    return (
        f"**{name[0].upper() + name[1:]}**: {measured}. See its table above: a sampling "
        "profiler's error on a short run is mostly the sampling error (about the square root "
        "of the number of samples on the part), so a longer run or a shorter "
        "`--profile-interval` would tighten it; an error that stays when the run is longer is "
        "a bias in the attribution, to be fixed in the sampler."
    )


def _split(results: dict[str, Any], measured: str) -> str:
    cases = results["accuracy"]["split"]["tools"].get("ours_cpu", {}).get("cases", {})
    shown = "; ".join(
        f"{case}: line A {c['line_a_python_pct']}% Python (truth 100), line B "
        f"{c['line_b_python_pct']}% (truth 0)"
        for case, c in cases.items()
    )
    load = results.get("load_end", 0.0)
    return (
        f"**Python/native split** ({measured}; {shown}). On the main thread the split is "
        "inferred from how late the timer signal's handler runs after the CPU timer expired "
        "(late means native code ran). The kernel checks CPU-time timers only on a scheduler "
        "tick that finds the process running, so on a busy machine (load average "
        f"{load:g} on {results['machine']['cores']} cores at the end of this run) a handler "
        "can come more than half an interval (5 ms of CPU) late while pure Python runs, and "
        "that Python time is counted as native; worker threads, split by their current "
        "instruction, are not affected. What would fix it: judge lateness against the "
        "delivery latency measured in the same run (a low percentile of the recent handlers' "
        "delays, which tracks the machine's load) instead of the fixed `PROMPT_FRACTION` of "
        "the interval."
    )


def closing_note(results: dict[str, Any], checked: list[Target]) -> str:
    """Why each missed target was missed, and what would fix it; '' when none was missed."""
    paragraphs = []
    for name, measured, ok, _ in checked:
        if ok is not False:
            continue
        if name.startswith("CPU-only overhead"):
            paragraphs.append(_cpu(results))
        elif name.startswith("full overhead"):
            if not any(p.startswith("**Full") for p in paragraphs):
                paragraphs.append(_full(results))
        elif name.startswith("Python/native split"):
            paragraphs.append(_split(results, measured))
        else:
            paragraphs.append(_accuracy(name, measured))
    if not paragraphs:
        return ""
    return "## Closing note: the targets missed, why, and what would fix them\n\n" + "\n\n".join(
        paragraphs
    )
