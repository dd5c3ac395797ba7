"""`--profile` is also pytest-profiling's flag. With both plugins installed, argparse would fail
with a traceback; we stop first with a message that says what to do."""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest

OTHER_PLUGINS = {"profiling": "pytest-profiling"}  # pytest11 entry-point name -> distribution


def _option_taken(parser: pytest.Parser, flag: str) -> bool:
    groups = [parser._anonymous, *parser._groups]  # pytest exposes no public listing
    return any(flag in opt.names() for group in groups for opt in group.options)


def _installed_plugins() -> set[str]:
    return {ep.name for ep in entry_points(group="pytest11")}


def check(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    """Raise a UsageError when another plugin owns (or will own) `--profile`."""
    rivals = [
        dist
        for name, dist in OTHER_PLUGINS.items()
        if name in _installed_plugins() and not pluginmanager.is_blocked(name)
    ]
    if _option_taken(parser, "--profile") and not rivals:
        rivals = ["another plugin"]
    if rivals:
        raise pytest.UsageError(
            f"pytest-scalene and {rivals[0]} both define --profile. Disable one of them for "
            "this run: '-p no:profiling' keeps pytest-scalene, '-p no:scalene' keeps the other "
            "(or add it to addopts in your pytest configuration)."
        )
