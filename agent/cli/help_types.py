"""Help pages that name what a value is (``N``, ``TEXT``, ``PATH``), never a Python type.

Typer 0.29 labels every option with its annotation (``<str>``, ``<list[str]>``, and
``<bool>`` beside flags, which take no value at all). This swaps that label for the plain
click-style one, for every command at once. Typer is pinned to 0.29.x (pyproject.toml);
tests/test_cli_help.py scans the help of every command, so a typer that changes these
internals fails there rather than in front of a user.
"""

from __future__ import annotations

import datetime as dt
import pathlib
from typing import Any, get_args, get_origin

from typer import core as typer_core

_PLAIN = {int: "INTEGER", float: "FLOAT", str: "TEXT", bool: "BOOLEAN", dt.datetime: "DATETIME"}


def _label(annotation: Any) -> str:
    if get_origin(annotation) in (list, tuple):
        return " ".join(_label(arg) for arg in get_args(annotation) if arg is not Ellipsis)
    if isinstance(annotation, type) and issubclass(annotation, pathlib.PurePath):
        return "PATH"
    return _PLAIN.get(annotation, "VALUE")


def plain_display_type(param: Any, ctx: Any) -> str:
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return ""  # a flag takes no value: nothing to name
    if param.metavar is not None:
        return str(param.metavar)
    descriptor = param.type_descriptor
    if descriptor.is_choice:
        return "|".join(str(choice) for choice in descriptor.choices or ())
    if descriptor.is_path:
        return "PATH"
    return _label(descriptor.annotation)


def _argument_display_type(param: Any, ctx: Any) -> str | None:
    # An argument's name column already shows its metavar; do not repeat it as its type.
    return None if param.metavar is not None else plain_display_type(param, ctx)


def install() -> None:
    typer_core._TyperParameter.display_type = plain_display_type  # type: ignore[method-assign,assignment]
    typer_core.TyperArgument.display_type_rich = _argument_display_type  # type: ignore[method-assign,assignment]
