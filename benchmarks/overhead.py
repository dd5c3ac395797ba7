"""Overhead: every tool around the same pytest run, interleaved round by round.

In each round every workload runs unprofiled and under each tool, in an order rotated from round
to round, so that a change in the machine's load hits all of them alike. A tool's ratio for a
workload is the median over rounds of (tool's time / the same round's unprofiled time).
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable
from dataclasses import dataclass

import tools
from tools import BASE, Context, Tool

WORKLOAD_NAMES = ["julia", "raytrace", "mdp", "alloc", "numpy", "copy", "threads"]
SUITE = "suite"


@dataclass(frozen=True)
class Workload:
    name: str
    target: list[str]
    tools: list[Tool]


QUICK_WORKLOADS = ["julia", "alloc", SUITE]
# Every workload runs under this plugin and the peers the targets name; the other peers run on
# one workload of each kind (pure Python, allocation, the pytest suite), which keeps the full
# run under 30 minutes on 2 cores (Scalene alone costs 4-10x per run). --quick: targets only.
MAIN_TOOLS = {"ours_cpu", "ours_full", "scalene_full", "memray", "pytest_memray"}
OTHER_PEERS_WORKLOADS = {"julia", "alloc", SUITE}
MAX_FAILURES = 2  # a tool that fails this often on a workload is not run on it again
# The fixed cost per pytest session: one empty test, unprofiled and under each of these.
STARTUP = Workload(
    "startup", ["test_empty.py"], [tools.OURS_CPU, tools.OURS_FULL, tools.OURS_FULL_PRELOADED]
)


def workloads(
    available: Callable[[Tool], bool], quick: bool, names: list[str] | None = None
) -> list[Workload]:
    """The workloads to measure, each with the tools that run on it."""

    def chosen(name: str) -> list[Tool]:
        candidates = tools.OVERHEAD_TOOLS + (tools.SUITE_ONLY_TOOLS if name == SUITE else [])
        return [
            t
            for t in candidates
            if available(t)
            and (t.key in MAIN_TOOLS or (not quick and name in OTHER_PEERS_WORKLOADS))
        ]

    names = names or (QUICK_WORKLOADS if quick else [*WORKLOAD_NAMES, SUITE])
    return [
        Workload(n, ["suite"] if n == SUITE else [f"bench_workloads.py::test_{n}"], chosen(n))
        for n in names
    ]


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def run(
    ctx: Context,
    scale: float,
    rounds: int,
    chosen: list[Workload],
    log: Callable[[str], None],
) -> dict[str, object]:
    """Measure; returns the raw runs (per workload, per tool, one entry per round, None where
    the run failed or was skipped) and why runs failed."""
    env = tools.base_env(scale)
    raw: dict[str, dict[str, list[dict[str, object] | None]]] = {
        w.name: {t.key: [] for t in [BASE, *w.tools]} for w in chosen
    }
    failed: dict[str, dict[str, list[str]]] = {w.name: {} for w in chosen}
    timeouts: dict[str, float] = {}
    for w in chosen:  # warm-up: caches, and a check that the workload passes unprofiled
        warm = tools.measure(BASE, ctx, w.target, env, f"{w.name}-warm", timeout_s=600)
        if not warm.ok:
            raise SystemExit(f"workload {w.name} fails unprofiled: {warm.log_tail}")
        timeouts[w.name] = max(90.0, 15 * warm.wall_s)
        log(f"  warm-up {w.name}: {warm.wall_s:.2f} s")
    loads = []
    for r in range(rounds):
        loads.append(_load())
        for w in chosen:
            order = [BASE, *w.tools]
            shift = r % len(order)
            for tool in order[shift:] + order[:shift]:
                errors = failed[w.name].setdefault(tool.key, [])
                if len(errors) >= MAX_FAILURES or any(e.startswith("timed out") for e in errors):
                    raw[w.name][tool.key].append(None)
                    continue
                result = tools.measure(tool, ctx, w.target, env, w.name, timeouts[w.name])
                if not result.ok:
                    why = "timed out" if result.timed_out else f"exit {result.returncode}"
                    errors.append(f"{why}: {result.log_tail}")
                    log(f"  {w.name} / {tool.label} failed ({why}): {result.log_tail[:300]}")
                    raw[w.name][tool.key].append(None)
                    continue
                raw[w.name][tool.key].append(
                    {
                        "wall_s": round(result.wall_s, 4),
                        "cpu_s": round(result.cpu_s, 4),
                        "output_bytes": result.output_bytes,
                    }
                )
        log(f"  round {r + 1}/{rounds} done (load average {_load()})")
    loads.append(_load())
    failed = {w: {k: e for k, e in by_tool.items() if e} for w, by_tool in failed.items()}
    return {
        "scale": scale,
        "rounds": rounds,
        "load_average_per_round": loads,
        "runs": raw,
        "failed": failed,
    }


def ratios(raw: dict[str, object]) -> dict[str, dict[str, dict[str, float | None]]]:
    """Per workload and tool: median paired ratios (wall and CPU) and output bytes per second."""
    out: dict[str, dict[str, dict[str, float | None]]] = {}
    runs = raw["runs"]
    assert isinstance(runs, dict)
    for workload, by_tool in runs.items():
        base = by_tool[BASE.key]
        out[workload] = {}
        for key, measured in by_tool.items():
            pairs = [
                (b, m)
                for b, m in zip(base, measured, strict=True)
                if b is not None and m is not None
            ]
            if not pairs:
                out[workload][key] = {"wall": None, "cpu": None, "bytes_per_s": None, "n": 0}
                continue
            out[workload][key] = {
                "wall": statistics.median(m["wall_s"] / b["wall_s"] for b, m in pairs),
                "cpu": statistics.median(m["cpu_s"] / b["cpu_s"] for b, m in pairs),
                "wall_s": statistics.median(m["wall_s"] for _, m in pairs),
                "bytes_per_s": statistics.median(m["output_bytes"] / m["wall_s"] for _, m in pairs),
                "n": len(pairs),
            }
    return out


def summary(per_workload: dict[str, dict[str, dict[str, float | None]]]) -> dict[str, dict]:
    """Per tool: median and worst over the workloads it ran on (the suite included)."""
    keys: list[str] = []
    for by_tool in per_workload.values():
        keys += [k for k in by_tool if k not in keys]
    out: dict[str, dict] = {}
    for key in keys:
        walls = [w[key]["wall"] for w in per_workload.values() if w.get(key, {}).get("wall")]
        cpus = [w[key]["cpu"] for w in per_workload.values() if w.get(key, {}).get("cpu")]
        out[key] = {
            "median_wall": statistics.median(walls) if walls else None,
            "worst_wall": max(walls) if walls else None,
            "median_cpu": statistics.median(cpus) if cpus else None,
            "worst_cpu": max(cpus) if cpus else None,
            "workloads": len(walls),
        }
    return out
