"""Accuracy against ground truth: the 512 MiB touch test, the Python/native split and the
function-bias microbenchmark, for pytest-scalene and the peers that report each figure."""

from __future__ import annotations

import json
import pstats
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tools
from tools import Context, Tool

TOUCH_MIB = 512
TOUCH_FRACTIONS = (0.0, 0.25, 0.5, 0.75, 1.0)
TOUCH_FRACTIONS_QUICK = (0.0, 1.0)
SPLIT_SCALE_FULL, SPLIT_SCALE_QUICK = 1.0, 0.5  # ~1 s per line in full mode, ~0.5 s quick
BIAS_SHARES_FULL = (0.1, 0.3, 0.5, 0.7, 0.9)
BIAS_SHARES_QUICK = (0.1, 0.5, 0.9)
BIAS_TOOLS_QUICK = {"ours_cpu", "scalene_cpu", "py_spy"}  # the deterministic ones are slow
Log = Callable[[str], None]


def _failure(run: tools.Run) -> str:
    return ("timed out" if run.timed_out else f"exit {run.returncode}") + f": {run.log_tail}"


def _ours_tests(path: Path) -> tuple[dict[str, Any], list[str]]:
    data = json.loads(path.read_text())
    return data["tests"], data.get("notes", [])


def _scalene_lines(path: Path, filename: str) -> list[dict[str, Any]]:
    data = json.loads(path.read_text())
    for name, info in data.get("files", {}).items():
        if name.endswith(filename):
            return info["lines"]
    return []


# -- 512 MiB touch ---------------------------------------------------------------------------
def _ours_peak(path: Path) -> tuple[float | None, str]:
    tests, notes = _ours_tests(path)
    (test,) = tests.values()
    if "peak_mb" not in test:
        why = next((n for n in notes if "memory" in n), "no peak_mb in the JSON profile")
        return None, why
    return float(test["peak_mb"]), ""


def _scalene_peak(path: Path) -> tuple[float | None, str]:
    lines = _scalene_lines(path, "acc_touch.py")
    peak = max((ln.get("n_peak_mb", 0.0) for ln in lines), default=0.0)
    return (peak, "") if lines else (None, "no line of acc_touch.py in Scalene's profile")


def _memray_peak(path: Path) -> tuple[float | None, str]:
    """Bytes live at the high-water mark that test_touch allocated (import-time allocations
    of the test module, which also have acc_touch.py on their stack, are not the test's)."""
    import memray

    files = [path] if path.is_file() else sorted(path.rglob("*.bin"))
    total = 0
    for one in files:
        reader = memray.FileReader(str(one))
        for record in reader.get_high_watermark_allocation_records(merge_threads=True):
            if any(frame[0] == "test_touch" for frame in record.stack_trace()):
                total += record.size
    return total / 2**20, ""


TOUCH_TOOLS: list[tuple[Tool, Callable[[Path], tuple[float | None, str]]]] = [
    (tools.OURS_FULL, _ours_peak),
    (tools.SCALENE_FULL, _scalene_peak),
    (tools.MEMRAY, _memray_peak),
]


def touch(ctx: Context, quick: bool, available: Callable[[Tool], bool], log: Log) -> dict[str, Any]:
    """Peak reported for a 512 MiB array of which a fraction is touched; truth: 512 MiB."""
    fractions = TOUCH_FRACTIONS_QUICK if quick else TOUCH_FRACTIONS
    out: dict[str, Any] = {"truth_mb": TOUCH_MIB, "fractions": list(fractions), "tools": {}}
    for tool, parse in TOUCH_TOOLS:
        entry: dict[str, Any] = {"label": tool.label, "peak_mb": [], "error_pct": [], "why": ""}
        if not available(tool):
            entry["why"] = f"{tool.needs} is not installed"
        for fraction in fractions if available(tool) else ():
            env = dict(tools.base_env(1.0), BENCH_TOUCH_FRACTION=str(fraction))
            run = tools.measure(tool, ctx, ["acc_touch.py"], env, "touch", 300, keep_output=True)
            peak, why = parse(run.output) if run.ok else (None, _failure(run))
            entry["peak_mb"].append(None if peak is None else round(peak, 2))
            entry["error_pct"].append(
                None if peak is None else round(100 * abs(peak - TOUCH_MIB) / TOUCH_MIB, 2)
            )
            entry["why"] = entry["why"] or why
        out["tools"][tool.key] = entry
        log(f"  touch {tool.label}: {entry['peak_mb']} {entry['why'][:120]}")
    return out


# -- Python/native split ---------------------------------------------------------------------
def _marked_lines(marker: str) -> set[int]:
    source = (tools.WORKLOADS / "acc_split.py").read_text().splitlines()
    return {i + 1 for i, text in enumerate(source) if marker in text}


def _ours_split(path: Path) -> dict[str, tuple[float, float]]:
    tests, _ = _ours_tests(path)
    (test,) = tests.values()
    out = {}
    for marker in ("LINE_A", "LINE_B"):
        wanted = _marked_lines(marker)
        lines = [ln for ln in test["lines"] if ln["line"] in wanted]
        out[marker] = (
            sum(ln["cpu_python_s"] for ln in lines),
            sum(ln["cpu_native_s"] for ln in lines),
        )
    return out


def _scalene_split(path: Path) -> dict[str, tuple[float, float]]:
    lines = _scalene_lines(path, "acc_split.py")
    out = {}
    for marker in ("LINE_A", "LINE_B"):
        wanted = _marked_lines(marker)
        chosen = [ln for ln in lines if ln["lineno"] in wanted]
        out[marker] = (
            sum(ln["n_cpu_percent_python"] for ln in chosen),
            sum(ln["n_cpu_percent_c"] for ln in chosen),
        )
    return out


SPLIT_TOOLS = [(tools.OURS_CPU, _ours_split), (tools.SCALENE_CPU, _scalene_split)]


def _pct(part: float, whole: float) -> float | None:
    return round(100 * part / whole, 1) if whole > 0 else None


def split(ctx: Context, quick: bool, available: Callable[[Tool], bool], log: Log) -> dict[str, Any]:
    """Line A is all Python, line B all native: the reported Python share of each line, and of
    the two together against the time the test measured around them (thread CPU time)."""
    out: dict[str, Any] = {"tools": {}}
    for tool, parse in SPLIT_TOOLS:
        entry: dict[str, Any] = {"label": tool.label, "cases": {}, "why": ""}
        if not available(tool):
            entry["why"] = f"{tool.needs} is not installed"
        for case in ("main", "thread") if available(tool) else ():
            truth_file = ctx.out_dir / "split-truth.json"
            scale = SPLIT_SCALE_QUICK if quick else SPLIT_SCALE_FULL
            env = dict(tools.base_env(scale), BENCH_TRUTH=str(truth_file))
            target = [f"acc_split.py::test_split_{case}"]
            run = tools.measure(tool, ctx, target, env, "split", 300, keep_output=True)
            if not run.ok:
                entry["why"] = _failure(run)
                continue
            truth = json.loads(truth_file.read_text())
            (a_py, a_nat), (b_py, b_nat) = (parse(run.output)[m] for m in ("LINE_A", "LINE_B"))
            a_pct, b_pct = _pct(a_py, a_py + a_nat), _pct(b_py, b_py + b_nat)
            total_pct = _pct(a_py + b_py, a_py + a_nat + b_py + b_nat)
            truth_pct = _pct(truth["a"], truth["a"] + truth["b"])
            # A line with no samples has no split of its own, but its missing time still
            # shows in the share of the two lines together.
            errors = [
                e
                for e in (
                    abs(100 - a_pct) if a_pct is not None else None,
                    b_pct,
                    abs(total_pct - truth_pct) if total_pct is not None else None,
                )
                if e is not None
            ]
            entry["cases"][case] = {
                "line_a_python_pct": a_pct,
                "line_b_python_pct": b_pct,
                "python_pct": total_pct,
                "truth_python_pct": truth_pct,
                "error_points": round(max(errors), 1) if errors else None,
            }
        out["tools"][tool.key] = entry
        log(f"  split {tool.label}: {entry['cases']} {entry['why'][:120]}")
    return out


# -- function bias ---------------------------------------------------------------------------
def _ours_bias(path: Path) -> float:
    tests, _ = _ours_tests(path)
    (test,) = tests.values()

    def cpu(*functions: str) -> float:
        return sum(
            ln["cpu_python_s"] + ln["cpu_native_s"] + ln["cpu_system_s"]
            for ln in test["lines"]
            if ln["function"] in functions
        )

    helper, inline = cpu("calls_helper", "helper"), cpu("inlined")
    return helper / (helper + inline)


def _scalene_bias(path: Path) -> float:
    data = json.loads(path.read_text())
    for name, info in data.get("files", {}).items():
        if name.endswith("acc_bias.py"):
            pct = {
                fn["line"]: fn["n_cpu_percent_python"] + fn["n_cpu_percent_c"] + fn["n_sys_percent"]
                for fn in info["functions"]
            }
            helper = pct.get("calls_helper", 0.0) + pct.get("helper", 0.0)
            return helper / (helper + pct.get("inlined", 0.0))
    raise ValueError("no acc_bias.py in Scalene's profile")


def _pstats_bias(path: Path) -> float:
    """cProfile and pyinstrument (pstats renderer): cumulative time of the two functions."""
    stats = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
    cum = {}
    for (filename, _, name), (_, _, _, cumtime, _) in stats.items():
        if filename.endswith("acc_bias.py") and name in ("calls_helper", "inlined"):
            cum[name] = cum.get(name, 0.0) + cumtime
    return cum["calls_helper"] / (cum["calls_helper"] + cum["inlined"])


def _py_spy_bias(path: Path) -> float:
    helper = inline = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if "calls_helper (" in stack:
            helper += int(count)
        elif "inlined (" in stack:
            inline += int(count)
    return helper / (helper + inline)


BIAS_TOOLS = [
    (tools.OURS_CPU, _ours_bias),
    (tools.SCALENE_CPU, _scalene_bias),
    (tools.PY_SPY, _py_spy_bias),
    (tools.PYINSTRUMENT, _pstats_bias),
    (tools.CPROFILE, _pstats_bias),
]


def _per_iteration_costs() -> tuple[float, float]:
    """Thread CPU seconds per iteration of calls_helper and of inlined, measured here (the
    bench venv runs the same interpreter as the tests)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("acc_bias", tools.WORKLOADS / "acc_bias.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    costs = []
    for fn in (module.calls_helper, module.inlined):
        samples = []
        for _ in range(3):
            t = time.thread_time()
            fn(300_000)
            samples.append((time.thread_time() - t) / 300_000)
        costs.append(min(samples))
    return costs[0], costs[1]


def bias(ctx: Context, quick: bool, available: Callable[[Tool], bool], log: Log) -> dict[str, Any]:
    """The share of time in the helper-calling function, as each tool reports it, against the
    share measured without any profiler (thread CPU time, median of 3 unprofiled runs; one in
    --quick mode)."""
    shares = BIAS_SHARES_QUICK if quick else BIAS_SHARES_FULL
    seconds = 1.0 if quick else 2.0
    c_helper, c_inline = _per_iteration_costs()
    truth_file = ctx.out_dir / "bias-truth.json"
    out: dict[str, Any] = {"target_shares": list(shares), "seconds": seconds, "points": []}
    for share in shares:
        n, m = int(share * seconds / c_helper), int((1 - share) * seconds / c_inline)
        env = dict(
            tools.base_env(1.0), BENCH_BIAS_N=str(n), BENCH_BIAS_M=str(m),
            BENCH_TRUTH=str(truth_file),
        )  # fmt: skip
        truths = []
        for _ in range(1 if quick else 3):
            run = tools.measure(tools.BASE, ctx, ["acc_bias.py"], env, "bias", 300)
            if not run.ok:
                raise SystemExit(f"the bias workload fails unprofiled: {run.log_tail}")
            t = json.loads(truth_file.read_text())
            truths.append(t["calls_helper"] / (t["calls_helper"] + t["inlined"]))
        point: dict[str, Any] = {"truth": round(statistics.median(truths), 4), "reported": {}}
        for tool, parse in BIAS_TOOLS:
            if quick and tool.key not in BIAS_TOOLS_QUICK:
                continue
            if not available(tool):
                point["reported"][tool.key] = {"why": f"{tool.needs} is not installed"}
                continue
            run = tools.measure(tool, ctx, ["acc_bias.py"], env, "bias", 300, keep_output=True)
            try:
                value = parse(run.output) if run.ok else None
                why = "" if run.ok else _failure(run)
            except (ValueError, KeyError, ZeroDivisionError, OSError) as exc:
                value, why = None, f"could not read its output: {exc!r}"
            point["reported"][tool.key] = (
                {"share": round(value, 4), "error_points": round(100 * (value - point["truth"]), 1)}
                if value is not None
                else {"why": why}
            )
        out["points"].append(point)
        log(f"  bias {share:.0%}: truth {point['truth']:.3f} {point['reported']}")
    return out
