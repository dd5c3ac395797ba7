"""Every `--profile-*` option is also an ini key: its name without the dashes, `-` as `_`
(`--profile-repeat` -> `profile_repeat`), in `[tool.pytest.ini_options]`, pytest.ini, tox.ini or
setup.cfg. The command line wins: the options are declared with no argparse default, so that an
option left off the command line reads None; `resolve` then fills it from the ini key, read with
the option's own converter (same accepted values, same messages), or from its real default.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, NamedTuple

import pytest

PREFIX = "--profile"


class IniOption(NamedTuple):
    flag: str  # "--profile-repeat"
    dest: str  # "profile_repeat": the attribute and the ini key
    default: Any
    kind: str  # "flag" (store_true), "list" (append) or "value"
    convert: Any  # the argparse type, or None
    choices: tuple[str, ...] | None


_OPTIONS: dict[str, IniOption] = {}
_INI_TYPES = {"flag": "bool", "list": "args", "value": "string"}


def _kind(attrs: dict[str, Any]) -> str:
    action = attrs.get("action")
    return {"store_true": "flag", "append": "list"}.get(str(action), "value")


def adder(group: pytest.OptionGroup) -> Callable[..., None]:
    """`group.addoption`, each --profile-* option declared with no default and given an ini key
    of the same name (pytest pre-sets argparse defaults in config.option, so the default must be
    None from the start for resolve() to see what the command line left out)."""

    def add(*names: str, **attrs: Any) -> None:
        flag = next((n for n in names if n.startswith(PREFIX)), None)
        if flag is None or getattr(group, "parser", None) is None:
            group.addoption(*names, **attrs)
            return
        dest = attrs.get("dest") or flag[2:].replace("-", "_")
        kind = _kind(attrs)
        choices = attrs.get("choices")
        default = attrs.get("default", [] if kind == "list" else False if kind == "flag" else None)
        convert = attrs.get("type")
        _OPTIONS[dest] = IniOption(flag, dest, default, kind, convert, choices and tuple(choices))
        group.addoption(*names, **{**attrs, "default": None})
        group.parser.addini(
            dest,
            f"pytest-scalene: as {flag} (the command line wins)",
            type=_INI_TYPES[kind],  # type: ignore[arg-type]
            default=None,
        )

    return add


def _from_ini(option: IniOption, raw: Any) -> Any:
    where = f"ini key {option.dest} = {raw!r}"
    if option.kind == "flag":
        return bool(raw)
    if option.kind == "list":
        return [str(v) for v in raw]
    text = str(raw).strip()
    if option.choices is not None and text not in option.choices:
        raise pytest.UsageError(f"{where}: expected one of {', '.join(option.choices)}")
    if option.convert is None:
        return text
    try:
        return option.convert(text)
    except argparse.ArgumentTypeError as exc:
        raise pytest.UsageError(f"{where}: {exc}") from None


def resolve(config: pytest.Config, namespace: Any) -> None:
    """Fill every option left off the command line from its ini key or its default."""
    for option in _OPTIONS.values():
        if getattr(namespace, option.dest, None) is not None:
            continue
        try:
            raw = config.getini(option.dest)
        except (ValueError, pytest.UsageError) as exc:  # a bool key that is not a truth value
            raise pytest.UsageError(
                f"ini key {option.dest}: {exc}; expected true or false"
            ) from None
        value = option.default if raw is None or raw == "" else _from_ini(option, raw)
        setattr(namespace, option.dest, value)


def any_set(namespace: Any) -> bool:
    """Some --profile-* option (or its ini key) is set to other than its default: the session
    asks for pytest-scalene (after resolve())."""
    return any(getattr(namespace, o.dest, o.default) != o.default for o in _OPTIONS.values())


def ini_keys() -> dict[str, str]:
    """ini key -> option, for the docs' test."""
    return {o.dest: o.flag for o in _OPTIONS.values()}
