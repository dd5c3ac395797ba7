"""The PNG beside docs/benchmarks.md: overhead per workload and tool, memory peaks, bias."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from targets import TARGET_CPU, TARGET_FULL
from tools import LABEL, TOOL_ORDER


def draw(results: dict[str, Any], path: Path) -> str | None:
    """The PNG: overhead per workload and tool, memory peaks, function bias. Returns why it
    could not be drawn, or None."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError as exc:
        return f"matplotlib is not installed ({exc})"
    per = results["overhead"]["per_workload"]
    keys = [t.key for t in TOOL_ORDER if t.key in results["overhead"]["summary"]]
    fig, axes = plt.subplots(1, 3, figsize=(17, 5), gridspec_kw={"width_ratios": [3, 1, 1]})
    ax = axes[0]
    names = list(per)
    width = 0.8 / max(1, len(keys))
    for i, key in enumerate(keys):
        ys = [per[w].get(key, {}).get("wall") or 0 for w in names]
        ax.bar([x + i * width for x in range(len(names))], ys, width, label=LABEL[key])
    ax.axhline(TARGET_CPU, color="k", lw=0.8, ls="--")
    ax.axhline(TARGET_FULL, color="k", lw=0.8, ls=":")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%gx"))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_yticks([0.5, 1, TARGET_FULL, 2, 4, 8, 16])
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(names))], names)
    ax.set_ylabel("wall time / unprofiled (log)")
    ax.set_title(f"Overhead (dashed {TARGET_CPU:g}x, dotted {TARGET_FULL:g}x)")
    if keys:
        ax.legend(fontsize=7, ncol=3)
    touch = results["accuracy"]["touch"]
    ax = axes[1]
    fractions = [100 * f for f in touch["fractions"]]
    truth = touch.get("truth_mb", 512)
    ax.axhspan(truth * 0.98, truth * 1.02, color="0.85", label="truth ±2%")
    for entry, marker in zip(touch["tools"].values(), "osv^", strict=False):
        pts = [(f, p) for f, p in zip(fractions, entry["peak_mb"], strict=False) if p is not None]
        if pts:
            ax.plot(*zip(*pts, strict=True), marker + "-", label=entry["label"], alpha=0.8)
    ax.set_xlabel("% of the 512 MiB touched")
    ax.set_ylabel("reported peak, MiB")
    ax.set_ylim(0, 600)
    ax.set_title("Memory accuracy")
    ax.legend(fontsize=7)
    bias = results["accuracy"]["bias"]
    ax = axes[2]
    ax.plot([0, 100], [0, 100], "k--", lw=0.8, label="truth")
    reported = bias["points"][0]["reported"] if bias["points"] else {}
    for key in [k for k in (t.key for t in TOOL_ORDER) if k in reported]:
        pts = [
            (100 * p["truth"], 100 * p["reported"][key]["share"])
            for p in bias["points"]
            if "share" in p["reported"][key]
        ]
        if pts:
            ax.plot(*zip(*pts, strict=True), "o-", label=LABEL[key])
    ax.set_xlabel("true share of the helper side, %")
    ax.set_ylabel("reported share, %")
    ax.set_title("Function bias")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return None
