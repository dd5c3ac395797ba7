"""Options that were removed or renamed, still understood well enough to say what replaces them:
on the command line a usage error naming the replacement (exit status 4, before any test runs),
and the same for their ini keys. docs/options.md lists them."""

from __future__ import annotations

import argparse
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
