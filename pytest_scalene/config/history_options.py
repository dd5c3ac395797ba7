"""The history options: --profile-history (and the `profile_history` ini key), and judging a run
against the recent runs of this machine (--profile-compare-history, --profile-history-window)."""

from __future__ import annotations

import argparse
from typing import NamedTuple

import pytest

from . import ini_options

INI_KEY = "profile_history"
DEFAULT_WINDOW = 20
MIN_WINDOW = 5  # fewer earlier runs cannot give a median and a spread worth judging by


def _window(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < MIN_WINDOW:
        raise argparse.ArgumentTypeError(f"expected a whole number >= {MIN_WINDOW}, got {text!r}")
    return value


def add_history_options(group: pytest.OptionGroup) -> None:
    add = ini_options.adder(group)  # each also an ini key: profile_history, ...
    add(
        "--profile-history",
        metavar="URL",
        default=None,
        help="record this run (commit, machine, per-test and per-line figures, verdicts) in a "
        "history store: a path or sqlite:///PATH (SQLite), or postgresql://... (default: the "
        f"{INI_KEY} ini key; see docs/history.md)",
    )
    add(
        "--profile-compare-history",
        action="store_true",
        help="profile every test and fail those above the median plus the spread of their "
        "recent runs on this machine in the history store",
    )
    add(
        "--profile-history-window",
        type=_window,
        default=DEFAULT_WINDOW,
        metavar="N",
        help=f"--profile-compare-history judges against the last N runs (default "
        f"{DEFAULT_WINDOW}, at least {MIN_WINDOW})",
    )


class HistoryOptions(NamedTuple):
    url: str | None
    compare: bool
    window: int
    allow_ungated_cpu: bool = False  # --profile-allow-ungated-cpu (gates/cpu_resolution.py)

    @classmethod
    def from_config(cls, config: pytest.Config) -> HistoryOptions:
        url = config.getoption("--profile-history") or None
        compare = bool(config.getoption("--profile-compare-history"))
        if compare and not url:
            raise pytest.UsageError(
                "--profile-compare-history needs a history store: give --profile-history=URL "
                f"or the {INI_KEY} ini key"
            )
        window = config.getoption("--profile-history-window")
        return cls(url, compare, window, bool(config.getoption("--profile-allow-ungated-cpu")))
