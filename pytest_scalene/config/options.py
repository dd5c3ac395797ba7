"""Command-line options, validated once into a `ProfileOptions`."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import NamedTuple

import pytest

from ..core import runenv
from ..core.natural_values import BudgetError, parse_duration, parse_fraction, parse_size
from . import ini_options
from .history_options import add_history_options
from .option_errors import add_removed_options

# The exit status of a run whose tests passed but that a requested gate (A/B, instruction
# counts, history) could not judge in part: distinct from pytest's own (0-6; 6 is a newer pytest's
# MAX_WARNINGS_ERROR), so CI can tell it apart.
EXIT_UNJUDGED = 7
DEFAULT_INTERVAL_S = 0.01
# A prime just above 10 MB (10 * 2**20 = 10485760), as in the Scalene paper: a round number would
# resonate with power-of-two allocation patterns.
DEFAULT_MEMORY_THRESHOLD = 10485767
CODE_MAP_FILE = "code-map.json"  # beside the baselines: which code each test ran


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _interval(text: str) -> float:
    """Seconds, or a duration such as '10 ms' or '0.01 s'."""
    try:
        return _positive_float(text)
    except argparse.ArgumentTypeError as plain:
        try:
            value = parse_duration(text)
        except ValueError:
            raise plain from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
        return value


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def _fraction(text: str) -> float:
    """A fraction (0.25) or a percentage ('25%')."""
    try:
        return _non_negative_float(text)
    except argparse.ArgumentTypeError:
        try:
            return parse_fraction(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None


def _size_bytes(text: str) -> int:
    """Bytes, or a size such as '10 MB'."""
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError as plain:
        try:
            value = int(parse_size(text, "size") * 2**20)
        except BudgetError:
            raise argparse.ArgumentTypeError(
                f"{plain}; or a size such as '10 MB' (B, KB, MB, GB, KiB, MiB, GiB)"
            ) from None
        if value < 1:
            raise plain from None
        return value


def budget_entry(text: str) -> str:
    """--profile-budget's KEYWORD=VALUE (the value is checked with the marker's rules later,
    where the keywords are known: gates/budgets.py)."""
    keyword, equals, value = text.partition("=")
    if not equals or not keyword.strip() or not value.strip():
        raise argparse.ArgumentTypeError(
            f"expected KEYWORD=VALUE with a perf_budget keyword, such as leaks=false or "
            f"cpu_s=2s, got {text!r}"
        )
    return text


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


class Repeat(NamedTuple):
    """--profile-repeat: `runs` runs of each test's call, and more until their wall times add
    up to `seconds` (N or a duration such as 10s; docs/baselines.md, the noise rule)."""

    runs: int = 1
    seconds: float = 0.0

    @property
    def more(self) -> bool:
        return self.runs > 1 or self.seconds > 0

    def __str__(self) -> str:  # as given on the command line
        return f"{self.seconds:g}s" if self.seconds else str(self.runs)


def _repeat(text: str) -> Repeat:
    if not text.strip().endswith("s"):
        return Repeat(runs=positive_int(text))
    try:
        seconds = float(text.strip()[:-1])
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number of runs or a duration such as 10s, got {text!r}"
        ) from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise argparse.ArgumentTypeError(f"expected a duration > 0 such as 10s, got {text!r}")
    return Repeat(seconds=seconds)


def _output_file(text: str) -> Path:
    path = Path(text)
    if not text or path.is_dir():
        raise argparse.ArgumentTypeError(f"expected a file path, got the directory {text!r}")
    return path


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("scalene", "pytest-scalene: per-line profiling, budgets, baselines")
    add = ini_options.adder(group)  # each option also an ini key, the command line winning
    add("--profile", action="store_true", help="profile every test (CPU, memory, copy, GPU)")
    add(
        "--profile-interval",
        type=_interval,
        default=DEFAULT_INTERVAL_S,
        metavar="SECONDS",
        help="CPU sampling interval (default 0.01)",
    )
    add(
        "--profile-clock",
        choices=("cpu", "wall"),
        default="cpu",
        help="cpu: sample on process CPU time (default); wall: on wall time, waiting included",
    )
    add(
        "--profile-include",
        action="append",
        default=[],
        metavar="GLOB",
        help="also profile files matching GLOB (repeatable)",
    )
    add(
        "--profile-exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help="never profile files matching GLOB (repeatable)",
    )
    add(
        "--profile-json",
        type=_output_file,
        metavar="PATH",
        help="write the profile as JSON to PATH",
    )
    add(
        "--profile-html",
        type=_output_file,
        metavar="PATH",
        help="write a self-contained HTML profile (sortable, opens offline) to PATH",
    )
    add(
        "--profile-speedscope",
        type=_output_file,
        metavar="PATH",
        help="write sampled stacks per test in speedscope's format (flame graphs) to PATH",
    )
    add(
        "--profile-top",
        type=positive_int,
        default=None,
        metavar="N",
        help="show at most N lines per test in the terminal report (the N costliest, each with"
        " the line before and after it)",
    )
    add(
        "--profile-memory",
        choices=("auto", "yes", "no", "preload"),
        default="auto",
        help="memory, leak and copy profiling (default auto); preload: through LD_PRELOAD, "
        "re-executing pytest (sees allocations made before any hook, docs/memory.md)",
    )
    add(
        "--profile-memory-threshold",
        type=_size_bytes,
        default=DEFAULT_MEMORY_THRESHOLD,
        metavar="BYTES",
        help="bytes of net allocation between memory samples (default ~10 MB)",
    )
    add(
        "--profile-gpu",
        choices=("auto", "yes", "no"),
        default="auto",
        help="GPU utilisation and memory through NVML (default auto)",
    )
    add(
        "--profile-subprocesses",
        action="store_true",
        help="also profile the Python child processes a profiled test starts (subprocess,"
        " multiprocessing fork and spawn) and charge their lines to the test",
    )
    add_gate_options(group)
    add_history_options(group)
    add_removed_options(group, parser)


def add_gate_options(group: pytest.OptionGroup) -> None:
    """Budgets, baselines and CI outputs (docs/budgets.md, docs/baselines.md, docs/ci.md)."""
    add = ini_options.adder(group)  # each option also an ini key, the command line winning
    add(
        "--profile-save-baseline",
        action="store_true",
        help="profile every test and write its per-line figures under the baseline directory",
    )
    add(
        "--profile-compare",
        action="store_true",
        help="profile every test and fail those that regressed against the saved baseline",
    )
    add(
        "--profile-baseline-dir",
        metavar="DIR",
        default=None,
        help="where baselines are kept (default: <rootdir>/baselines)",
    )
    add(
        "--profile-measure",
        choices=("time", "instructions"),
        default="time",
        help="what CPU verdicts judge: time (sampled CPU time, the noise rule; default) or "
        "instructions (counted under valgrind's callgrind in a child session: repeats to "
        "1e-5, catches a 1.1x change even in a 1 ms test; needs valgrind)",
    )
    add(
        "--profile-compare-ref",
        metavar="REF",
        default=None,
        help="fail tests whose call got slower than at git REF (e.g. origin/main): REF checked "
        "out in a git worktree, both versions run alternately in two worker sessions, judged "
        "on the median of paired CPU-time ratios (docs/baselines.md)",
    )
    add(
        "--profile-select",
        choices=("changed", "all"),
        default="changed",
        help="which tests the A/B comparison and instruction counts measure: changed (default: "
        "those whose code changed since the code map; docs/selection.md) or all",
    )
    add(
        "--profile-allow-unjudged",
        action="store_true",
        help="let the run pass (exit status 0) when a requested gate could not judge a test: "
        "the A/B comparison, instruction counts, the history (otherwise exit status "
        f"{EXIT_UNJUDGED}; docs/ci.md)",
    )
    add(
        "--profile-allow-ungated-cpu",
        action="store_true",
        help="let the stored baselines and the history pass a test too short for its sampled "
        "CPU time to catch a 2x slowdown (its CPU then not gated; memory, leaks and copy volume "
        f"still judged); otherwise such a test is not judged (exit status {EXIT_UNJUDGED}; "
        "docs/baselines.md)",
    )
    add(
        "--profile-repeat",
        type=_repeat,
        default=Repeat(),
        metavar="N|SECONDS",
        help="run each profiled test's call N times, or (e.g. 10s) until its runs have lasted "
        "that long; CPU from the fastest run, the counted figures (memory, copy volume) from "
        "the first run (default 1)",
    )
    add(
        "--profile-markdown",
        type=_output_file,
        metavar="PATH",
        help="write a Markdown summary (gate failures, top lines) to PATH, e.g. for a CI summary",
    )
    add(
        "--profile-budget",
        action="append",
        type=budget_entry,
        default=[],
        metavar="KEYWORD=VALUE",
        help="a perf_budget limit for every profiled test whose markers do not set it "
        "(repeatable): leaks=false fails a likely leak, copy_mb_s='1 GB/s', cpu_s=2s, "
        "regression=10%% the allowed growth over the baseline (default: each metric's, "
        "docs/baselines.md); docs/budgets.md",
    )


class ProfileOptions(NamedTuple):
    enabled: bool  # the rest default as on the command line: code names what differs
    interval_s: float = DEFAULT_INTERVAL_S
    clock: str = "cpu"
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    json_path: Path | None = None
    top: int | None = None
    memory: str = "auto"
    memory_threshold: int = DEFAULT_MEMORY_THRESHOLD
    gpu: str = "auto"
    html_path: Path | None = None
    speedscope_path: Path | None = None
    subprocesses: bool = False

    @classmethod
    def from_config(cls, config: pytest.Config) -> ProfileOptions:
        opt = config.getoption
        return cls(
            enabled=any(opt(name) for name in runenv.PROFILE_EVERY_TEST),
            interval_s=opt("--profile-interval"),
            clock=opt("--profile-clock"),
            include=tuple(opt("--profile-include")),
            exclude=tuple(opt("--profile-exclude")),
            json_path=opt("--profile-json"),
            top=opt("--profile-top"),
            memory=opt("--profile-memory"),
            memory_threshold=opt("--profile-memory-threshold"),
            gpu=opt("--profile-gpu"),
            html_path=opt("--profile-html"),
            speedscope_path=opt("--profile-speedscope"),
            subprocesses=bool(opt("--profile-subprocesses")),
        )


class GateOptions(NamedTuple):
    save_baseline: bool
    compare: bool
    baseline_dir: Path
    repeat: Repeat
    regression: float | None  # --profile-budget regression=...
    markdown_path: Path | None
    budget: tuple[tuple[str, str], ...] = ()  # --profile-budget's other KEYWORD=VALUE pairs
    measure: str = "time"
    compare_ref: str | None = None
    allow_unjudged: bool = False
    select: str = "changed"
    allow_ungated_cpu: bool = False

    @classmethod
    def from_config(cls, config: pytest.Config) -> GateOptions:
        opt = config.getoption
        baseline_dir = opt("--profile-baseline-dir")
        budget = [_split(entry) for entry in opt("--profile-budget")]
        return cls(
            save_baseline=bool(opt("--profile-save-baseline")),
            compare=bool(opt("--profile-compare")),
            baseline_dir=Path(baseline_dir) if baseline_dir else config.rootpath / "baselines",
            repeat=opt("--profile-repeat"),
            regression=_regression(budget),
            markdown_path=opt("--profile-markdown"),
            budget=tuple(entry for entry in budget if entry[0] != "regression"),
            measure=opt("--profile-measure"),
            compare_ref=opt("--profile-compare-ref") or None,
            allow_unjudged=bool(opt("--profile-allow-unjudged")),
            select=opt("--profile-select"),
            allow_ungated_cpu=bool(opt("--profile-allow-ungated-cpu")),
        )


def _split(entry: str) -> tuple[str, str]:
    try:
        keyword, _, value = budget_entry(entry).partition("=")
    except argparse.ArgumentTypeError as exc:  # an ini key's entry: not converted by argparse
        raise pytest.UsageError(f"--profile-budget: {exc}") from None
    return keyword.strip(), value.strip()


def _regression(budget: list[tuple[str, str]]) -> float | None:
    """The allowed growth over the baseline for every metric: --profile-budget regression=."""
    given = [value for keyword, value in budget if keyword == "regression"]
    if not given:
        return None
    try:
        return _fraction(given[-1])
    except argparse.ArgumentTypeError as exc:
        raise pytest.UsageError(f"--profile-budget regression={given[-1]}: {exc}") from None
