"""docs/benchmarks.md (tables, targets with pass/miss), the JSON beside it, and the plot."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import findings
import plot
from targets import ratio as _x
from targets import targets, verdict
from tools import LABEL, TOOL_ORDER


def _n(value: float | None) -> str:
    return "no samples" if value is None else f"{value:g}"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _overhead_section(results: dict[str, Any]) -> str:
    ov = results["overhead"]
    per, summary = ov["per_workload"], ov["summary"]
    keys = [t.key for t in TOOL_ORDER if t.key in summary]
    header = ["workload", "unprofiled s", *[LABEL[k] for k in keys]]
    rows = []
    for workload, by_tool in per.items():
        base = by_tool["base"].get("wall_s")
        cells = []
        for key in keys:
            if key not in by_tool:
                cells.append("")
            elif by_tool[key]["wall"] is None:
                cells.append("failed" if key in ov["raw"]["failed"][workload] else "–")
            else:
                flag = "*" if key in ov["raw"]["failed"][workload] else ""
                cells.append(_x(by_tool[key]["wall"]) + flag)
        rows.append([workload, "–" if base is None else f"{base:.2f}", *cells])
    rows.append(["**median**", "", *[f"**{_x(summary[k]['median_wall'])}**" for k in keys]])
    rows.append(["worst", "", *[_x(summary[k]["worst_wall"]) for k in keys]])
    cpu_rows = [
        ["median", *[_x(summary[k]["median_cpu"]) for k in keys]],
        ["worst", *[_x(summary[k]["worst_cpu"]) for k in keys]],
    ]
    failures = [
        f"- {workload} / {LABEL[key]}: failed {len(whys)} time(s); {whys[-1][:600]}"
        for workload, by_tool in ov["raw"]["failed"].items()
        for key, whys in by_tool.items()
    ]
    loads = ", ".join(f"{x:g}" for x in ov["raw"]["load_average_per_round"])
    parts = [
        "## Overhead",
        f"Wall-clock time of the whole `pytest` run under each tool divided by the unprofiled "
        f"run of the same round; median of {ov['raw']['rounds']} interleaved rounds (the order "
        f"of the runs rotates each round). Load average at the start of each round and at the "
        f"end: {loads}. A blank cell: not run on that workload (in the full run, the peers "
        "that no target names run on one workload of each kind, to stay under 30 minutes; "
        "pytest-memray runs on the pytest suite only).",
        _table(header, rows),
        "CPU time (user + system of the whole process tree, the tool's own processes "
        "included), same runs. On a shared machine this is the steadier figure; an "
        "out-of-process sampler (py-spy) shows its cost here rather than in wall time.",
        _table(["CPU-time ratio", *[LABEL[k] for k in keys]], cpu_rows),
    ]
    if failures:
        parts += [
            "Runs that failed (a tool that timed out or failed twice on a workload is not run "
            "on it again; its ratio is over the runs that passed):",
            "\n".join(failures),
        ]
    return "\n\n".join(parts)


def _touch_section(touch: dict[str, Any]) -> str:
    header = ["touched", *[t["label"] for t in touch["tools"].values()]]
    rows = []
    for i, fraction in enumerate(touch["fractions"]):
        cells = []
        for entry in touch["tools"].values():
            peaks = entry["peak_mb"]
            if i < len(peaks) and peaks[i] is not None:
                cells.append(f"{peaks[i]:.1f} MiB ({entry['error_pct'][i]:.2f}%)")
            else:
                cells.append("not measured")
        rows.append([f"{fraction:.0%}", *cells])
    whys = [f"- {e['label']}: {e['why']}" for e in touch["tools"].values() if e["why"]]
    text = (
        "## Memory accuracy: 512 MiB array, a fraction touched\n\n"
        "The test allocates 512 MiB with `np.empty` and writes to a fraction of it. The "
        "program allocated 512 MiB at every fraction, so that is the truth; the error is "
        "|reported peak - 512| / 512. pytest-scalene: the test's `peak_mb`; Scalene: the "
        "allocating line's peak; memray: bytes live at the high-water mark allocated under "
        "`test_touch` (its API).\n\n" + _table(header, rows)
    )
    return text + ("\n\nNot measured:\n" + "\n".join(whys) if whys else "")


def _split_section(split: dict[str, Any]) -> str:
    header = ["tool", "case", "line A Python %", "line B Python %", "both: Python %",
              "truth %", "error (points)"]  # fmt: skip
    rows = []
    for entry in split["tools"].values():
        for case, c in entry["cases"].items():
            rows.append(
                [entry["label"], case, _n(c["line_a_python_pct"]), _n(c["line_b_python_pct"]),
                 _n(c["python_pct"]), _n(c["truth_python_pct"]), _n(c["error_points"])]
            )  # fmt: skip
        if entry["why"]:
            rows.append([entry["label"], "", "", "", "", "", f"not measured: {entry['why']}"])
    return (
        "## Python/native split\n\n"
        "Line A is a pure-Python loop (truth: 100% Python), line B a numpy sort (truth: 0%); "
        "'both' is the Python share of A and B together against the share of their time "
        "that the test measured around line A (thread CPU time). The error is the worst of "
        "the three differences. On the worker thread the main thread waits in `join()`. "
        "py-spy, memray, pyinstrument and cProfile do not report this split.\n\n"
        + _table(header, rows)
    )


def _bias_section(bias: dict[str, Any]) -> str:
    if not bias["points"]:
        return "## Function bias\n\nNot measured in this run."
    keys = [k for k in (t.key for t in TOOL_ORDER) if k in bias["points"][0]["reported"]]
    header = ["true share", *[LABEL[k] for k in keys]]
    rows = []
    for point in bias["points"]:
        cells = []
        for key in keys:
            r = point["reported"][key]
            cells.append(
                f"{r['share']:.1%} ({r['error_points']:+.1f})" if "share" in r else r["why"][:80]
            )
        rows.append([f"{point['truth']:.1%}", *cells])
    return (
        "## Function bias\n\n"
        "The same work done by a function that calls a helper in a loop and by one with the "
        "helper inlined, sized so that the helper side takes 10% to 90% of the time. Truth: "
        "the share measured without any profiler (thread CPU time, median of 3 runs). Each "
        "cell: the share the tool reports for the helper side (calls_helper + helper), and "
        f"its error in points. Total work {bias['seconds']:g} s per run.\n\n" + _table(header, rows)
    )


def _size_section(results: dict[str, Any]) -> str:
    per = results["overhead"]["per_workload"]
    keys = [
        t.key
        for t in TOOL_ORDER
        if any(t.key in w and w[t.key]["bytes_per_s"] for w in per.values())
    ]
    rows = []
    for workload, by_tool in per.items():
        cells = []
        for key in keys:
            bps = by_tool.get(key, {}).get("bytes_per_s")
            cells.append("–" if bps is None else f"{bps / 1024:,.1f}")
        rows.append([workload, *cells])
    return (
        "## Output size\n\n"
        "Bytes each tool wrote per second of run (KiB/s; pytest-scalene: the `--profile-json` "
        "file, which holds every test and line; memray: its capture file; Scalene: its JSON; "
        "py-spy: raw collapsed stacks; cProfile and pyinstrument: pstats).\n\n"
        + _table(["workload", *[LABEL[k] for k in keys]], rows)
    )


def _environment_section(results: dict[str, Any]) -> str:
    m = results["machine"]
    versions = ", ".join(f"{k} {v}" for k, v in results["versions"].items())
    missing = "".join(f"\n- {k}: {v}" for k, v in results["missing"].items())
    return (
        "## Machine and versions\n\n"
        f"- Date: {results['date']}; mode: {results['mode']} (scale {results['scale']}, "
        f"{results['overhead']['raw']['rounds']} rounds); whole run {results['elapsed_s']:.0f} s"
        + (f" ({results['cpu_s']:.0f} s of CPU)" if "cpu_s" in results else "")
        + "\n"
        f"- Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB, {m['os']}; "
        f"Python {m['python']}; commit {m['commit']}\n"
        f"- Load average (1 min) at start / end: {results['load_start']} / {results['load_end']}"
        " (above the core count, other work shared the machine: the CPU-time ratios are the "
        "steadier figure)\n"
        f"- Versions: {versions}\n"
        "- Every run: `python -m pytest -q -p pytest_scalene.plugin ...` with plugin autoload "
        "off, one BLAS thread, from benchmarks/workloads (its own rootdir); py-spy: "
        "`record --nonblocking --rate 100`; Scalene: `--program-path benchmarks/workloads` "
        "(without it Scalene profiles nothing under pytest)" + missing
    )


def _startup_section(results: dict[str, Any]) -> str:
    if "startup" not in results:
        return "## Fixed cost per pytest session\n\nNot measured in this run."
    per = results["startup"]["per_workload"]["startup"]
    base = per["base"]["wall_s"]
    rows = [
        [LABEL[key], f"{m['wall_s']:.3f}", f"{m['wall_s'] - base:+.3f}", _x(m["wall"])]
        for key, m in per.items()
        if m.get("wall_s") is not None
    ]
    return (
        "## Fixed cost per pytest session\n\n"
        "One empty test (`test_empty.py`): what a session costs before any test code runs "
        "(start-up, the allocator hooks installed in the running process, writing the "
        f"report). Median of {results['startup']['raw']['rounds']} interleaved rounds. 'Shim "
        "preloaded' starts with LD_PRELOAD already set, so the plugin has no tables to "
        "rewrite. Both are measured against pytest with the plugin installed; against pytest "
        "without it (CPU time, alternated rounds) see "
        "[benchmarks-ms-suite.md](benchmarks-ms-suite.md#start-up).\n\n"
        + _table(["tool", "wall s", "over unprofiled, s", "ratio"], rows)
    )


def markdown(results: dict[str, Any], plot_name: str | None) -> str:
    checked = targets(results)
    rows = [[t, m, verdict(ok) + (f" ({why})" if why else "")] for t, m, ok, why in checked]
    missed = [t for t, _, ok, _ in checked if ok is False]
    parts = [
        "# Benchmarks: overhead and accuracy next to the peers",
        "Generated by `python benchmarks/run.py` (see README, Development). Raw numbers: "
        f"[{results['json_name']}]({results['json_name']}).",
        "## Targets",
        _table(["target", "measured", "verdict"], rows),
        (
            "**Missed in this run:** " + "; ".join(missed) + ". Why, and what would fix it: "
            "the closing note at the end."
            if missed
            else "Every target measured in this run was met."
        ),
    ]
    if plot_name:
        parts.append(f"![overhead and accuracy]({plot_name})")
    parts += [
        _overhead_section(results),
        _startup_section(results),
        _touch_section(results["accuracy"]["touch"]),
        _split_section(results["accuracy"]["split"]),
        _bias_section(results["accuracy"]["bias"]),
        _size_section(results),
        _environment_section(results),
        findings.closing_note(results, checked),
    ]
    return "\n\n".join(p for p in parts if p) + "\n"


def write(results: dict[str, Any], out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    results["json_name"] = "benchmarks.json"
    png = out_dir / "benchmarks.png"
    why = plot.draw(results, png)
    results["plot"] = png.name if why is None else f"not drawn: {why}"
    (out_dir / "benchmarks.json").write_text(json.dumps(results, indent=1) + "\n")
    page = out_dir / "benchmarks.md"
    kept = _kept_blocks(page)
    page.write_text(markdown(results, png.name if why is None else None) + kept)
    return page


def _kept_blocks(page: Path) -> str:
    """Sections that other scripts write into the page (`<!-- kept: NAME -->` to
    `<!-- /kept: NAME -->`, e.g. benchmarks/counted_gates.py's): left in place."""
    text = page.read_text() if page.exists() else ""
    pattern = r"<!-- kept: ([\w-]+) -->.*?<!-- /kept: \1 -->"
    return "".join("\n" + m.group(0) + "\n" for m in re.finditer(pattern, text, re.S))
