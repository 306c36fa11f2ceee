"""Which module defines each command, so `proctor` imports only the one it runs.

Importing every command module took about 2 s (openai, docker, pydantic, sympy behind them)
before `proctor --version` could answer. The root group (:class:`LazyGroup`) now imports a
command's module when that command is asked for; `proctor --help` lists the commands from their
docstrings, read from the source without importing it. tests/cli/test_lazy_cli.py checks
that this table names every command in the order and with the help an eager import gives.
"""

from __future__ import annotations

import ast
import importlib
from difflib import get_close_matches
from pathlib import Path
from typing import Any

import typer
from typer import core as typer_core

# Every command module, in the order the eager registry imported them (the order of --help).
MODULES = (
    "audit_cmd",
    "bench_eed_cmd",
    "bench_loop_cmd",
    "bench_submission_cmd",
    "completion_cmd",
    "export_cmd",
    "image_cmd",
    "list_cmd",
    "rescore_cmd",
    "run_cmd",
    "sandbox_cmd",
    "score_cmd",
    "validate_cmd",
    "view_cmd",
)
# Top-level commands -> the module that defines each (decorated ``@app.command("NAME")``).
COMMANDS: dict[str, str] = {
    "export": "export_cmd",
    "rescore": "rescore_cmd",
    "run": "run_cmd",
    "quickstart": "run_cmd",
    "validate": "validate_cmd",
    "view": "view_cmd",
    "compare": "view_cmd",
    "completion": "completion_cmd",
}
# Sub-command groups (created in app.py) -> the modules that add commands to each.
GROUPS: dict[str, tuple[str, ...]] = {
    "sandbox": ("audit_cmd", "sandbox_cmd"),
    "image": ("image_cmd",),
    "bench": ("bench_eed_cmd", "bench_loop_cmd", "bench_submission_cmd", "sandbox_cmd"),
    "score": ("score_cmd",),
    "list": ("list_cmd",),
}
_HERE = Path(__file__).resolve().parent


def load(*modules: str) -> None:
    for module in modules:
        importlib.import_module(f"proctor.agent.cli.{module}")


def load_all() -> None:
    load(*MODULES)


def _docstring(module: str, name: str) -> str:
    """The docstring of the function ``module`` registers as command ``name``, read from source."""
    tree = ast.parse((_HERE / f"{module}.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        for decorator in node.decorator_list:
            if (
                isinstance(decorator, ast.Call)
                and isinstance(decorator.func, ast.Attribute)
                and decorator.func.attr == "command"
                and decorator.args
                and isinstance(decorator.args[0], ast.Constant)
                and decorator.args[0].value == name
            ):
                return ast.get_docstring(node) or ""
    raise LookupError(f"{module}.py registers no command {name!r}")


class LazyGroup(typer_core.TyperGroup):
    """The root `proctor` group: a command's module is imported when the command is resolved."""

    _listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        return [*COMMANDS, *GROUPS]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if self._listing and cmd_name in COMMANDS:
            # The root help needs a name and a help text, not the command: no import.
            return typer_core.TyperCommand(cmd_name, help=_docstring(COMMANDS[cmd_name], cmd_name))
        if cmd_name in COMMANDS:
            load(COMMANDS[cmd_name])
        elif cmd_name in GROUPS:
            if not self._listing:  # a group's own help text is app.py's: listing imports nothing
                load(*GROUPS[cmd_name])
        else:
            return None
        from proctor.agent.cli.app import app

        # Built after the import, so the command (or every command of the group) is on it.
        return typer.main.get_command(app).commands.get(cmd_name)  # type: ignore[attr-defined]

    def format_help(self, ctx: Any, formatter: Any) -> None:
        # Drawn here, not by typer's renderer, whose imports cost more than the rest of
        # `proctor --help` (root_help.py).
        from proctor.agent.cli.root_help import print_root_help

        self._listing = True
        try:
            print_root_help(self, ctx)
        finally:
            self._listing = False

    def shell_complete(self, ctx: Any, incomplete: str) -> list[Any]:
        # Completing a command's name needs its name and help, as the root help does: a TAB
        # after `proctor r` imports nothing. A command's options are completed by the command
        # itself, which resolve_command imports as running it would.
        self._listing = True
        try:
            return list(super().shell_complete(ctx, incomplete))
        finally:
            self._listing = False

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        try:
            return self._click_resolve_command(ctx, args)
        except typer_core._click.exceptions.UsageError as exc:
            # Typer guesses from the commands already built; here that is none of them.
            matches = get_close_matches(args[0], self.list_commands(ctx)) if args else []
            if matches:
                exc.message = f"{exc.message.rstrip('.')}. Did you mean {', '.join(map(repr, matches))}?"
            raise
