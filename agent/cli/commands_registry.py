"""Which module defines each command, so `proctor` imports only the one it runs.

Importing every command module took about 2 s (openai, docker, pydantic, sympy behind them)
before `proctor --version` could answer. The root group (:class:`LazyGroup`) now imports a
command's module when that command is asked for; its listing (the root page, completing a
command's name) reads each command's docstring from the source without importing it. The table
of which module defines what is command_table.py's (typer-free, for root_help.py);
tests/cli/test_lazy_cli.py checks that it names every command in the order and with the help an
eager import gives.
"""

from __future__ import annotations

from difflib import get_close_matches
from typing import Any

import typer
from typer import core as typer_core

# The table itself is typer-free (command_table.py), so `proctor --help` can read it alone.
from proctor.agent.cli.command_table import COMMANDS as COMMANDS
from proctor.agent.cli.command_table import GROUPS as GROUPS
from proctor.agent.cli.command_table import MODULES as MODULES
from proctor.agent.cli.command_table import docstring
from proctor.agent.cli.command_table import load as load
from proctor.agent.cli.command_table import load_all as load_all


class LazyGroup(typer_core.TyperGroup):
    """The root `proctor` group: a command's module is imported when the command is resolved."""

    _listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        return [*COMMANDS, *GROUPS]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if self._listing and cmd_name in COMMANDS:
            # The root help needs a name and a help text, not the command: no import.
            return typer_core.TyperCommand(cmd_name, help=docstring(COMMANDS[cmd_name], cmd_name))
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
        from proctor.agent.cli.root_help import page_of, print_page

        self._listing = True
        try:
            print_page(page_of(self, ctx))
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
