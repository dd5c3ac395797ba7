"""Command-line options, validated once into a `ProfileOptions`."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import pytest

DEFAULT_INTERVAL_S = 0.01
# A prime just above 10 MB (10 * 2**20 = 10485760), as in the Scalene paper: a round number would
# resonate with power-of-two allocation patterns.
DEFAULT_MEMORY_THRESHOLD = 10485767


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def _output_file(text: str) -> Path:
    path = Path(text)
    if not text or path.is_dir():
        raise argparse.ArgumentTypeError(f"expected a file path, got the directory {text!r}")
    return path


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("scalene", "pytest-scalene: per-line profiling, budgets, baselines")
    add = group.addoption
    add("--profile", action="store_true", help="profile every test (CPU, memory, copy, GPU)")
    add(
        "--profile-interval",
        type=_positive_float,
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
    add("--profile-json", metavar="PATH", help="write the profile as JSON to PATH")
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
        type=_positive_int,
        default=None,
        metavar="N",
        help="show at most N lines per test in the terminal report (the N costliest, each with"
        " the line before and after it)",
    )
    add(
        "--profile-memory",
        choices=("auto", "yes", "no"),
        default="auto",
        help="memory, leak and copy profiling through the preloaded shim (default auto)",
    )
    add(
        "--profile-memory-threshold",
        type=_positive_int,
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


@dataclass(frozen=True)
class ProfileOptions:
    enabled: bool
    interval_s: float
    clock: str
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    json_path: Path | None
    top: int | None
    memory: str
    memory_threshold: int
    gpu: str
    html_path: Path | None = None
    speedscope_path: Path | None = None

    @classmethod
    def from_config(cls, config: pytest.Config) -> ProfileOptions:
        opt = config.getoption
        json_path = opt("--profile-json")
        return cls(
            enabled=bool(opt("--profile")),
            interval_s=opt("--profile-interval"),
            clock=opt("--profile-clock"),
            include=tuple(opt("--profile-include")),
            exclude=tuple(opt("--profile-exclude")),
            json_path=Path(json_path) if json_path else None,
            top=opt("--profile-top"),
            memory=opt("--profile-memory"),
            memory_threshold=opt("--profile-memory-threshold"),
            gpu=opt("--profile-gpu"),
            html_path=opt("--profile-html"),
            speedscope_path=opt("--profile-speedscope"),
        )
