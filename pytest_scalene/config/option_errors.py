"""Options that cannot be used as written, stopped before any test runs (exit status 4) with a
message that says what to do:

- options that were removed or renamed, still understood well enough to name what replaces them,
  on the command line and as ini keys (docs/options.md lists them);
- `--profile`, which is also pytest-profiling's flag: with both plugins installed, argparse would
  fail with a traceback.
"""

from __future__ import annotations

import argparse
from importlib.metadata import PackageNotFoundError, distribution
from typing import Any

import pytest

# the option -> what to write instead
REMOVED = {
    "--profile-details": "-v (the per-test report)",
    "--profile-fail-on-leak": "--profile-budget leaks=false",
    "--profile-max-copy-mb-s": "--profile-budget copy_mb_s=VALUE",
    "--profile-regression": "--profile-budget regression=VALUE",
    "--profile-history-compare": "--profile-compare-history",
}


def ini_key(flag: str) -> str:
    return flag[2:].replace("-", "_")


def message(flag: str) -> str:
    return f"{flag} was removed: use {REMOVED[flag]} (docs/options.md, removed options)"


class _Removed(argparse.Action):
    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        raise argparse.ArgumentError(self, f"was removed: use {REMOVED[self.option_strings[0]]}")


def add_removed_options(group: pytest.OptionGroup, parser: pytest.Parser) -> None:
    """Hidden from --help; an ini key of each, so that a stale configuration fails as loudly."""
    for flag in REMOVED:
        group.addoption(
            flag,
            action=_Removed,
            nargs="?",
            dest=f"removed_{ini_key(flag)}",
            help=argparse.SUPPRESS,
        )
        parser.addini(ini_key(flag), f"removed: use {REMOVED[flag]}", default=None)


def check_ini(config: pytest.Config) -> None:
    """A removed option's ini key set in the configuration is a usage error."""
    for flag in REMOVED:
        if config.getini(ini_key(flag)) not in (None, "", []):
            raise pytest.UsageError(f"ini key {ini_key(flag)}: {message(flag)}")


# -- --profile, when another plugin owns it ------------------------------------------------------
OTHER_PLUGINS = {"profiling": "pytest-profiling"}  # pytest11 entry-point name -> distribution


def _option_taken(parser: pytest.Parser, flag: str) -> bool:
    groups = [parser._anonymous, *parser._groups]  # pytest exposes no public listing
    return any(flag in opt.names() for group in groups for opt in group.options)


def _installed(dist: str) -> bool:
    """One distribution looked up by name: 0.16 ms, where reading every distribution's entry
    points (each session) took 2.5 ms."""
    try:
        distribution(dist)
    except PackageNotFoundError:
        return False
    return True


def check_flag_owner(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    """Raise a UsageError when another plugin owns (or will own) `--profile`."""
    rivals = [
        dist
        for name, dist in OTHER_PLUGINS.items()
        if _installed(dist) and not pluginmanager.is_blocked(name)
    ]
    if _option_taken(parser, "--profile") and not rivals:
        rivals = ["another plugin"]
    if rivals:
        raise pytest.UsageError(
            f"pytest-scalene and {rivals[0]} both define --profile. Disable one of them for "
            "this run: '-p no:profiling' keeps pytest-scalene, '-p no:scalene' keeps the other "
            "(or add it to addopts in your pytest configuration)."
        )
