"""`proctor --help` (and bare `proctor`): the root's page, laid out as typer's pages are.

Typer's own renderer (typer.rich_utils) imports rich's Markdown (markdown-it), Syntax
(pygments) and Traceback when it loads, for markup modes and pretty tracebacks this CLI does
not use: measured at ~0.15 s of CPU, half of what `proctor --help` cost. The root page is a
usage line, the group's help and two panels, drawn here with the few rich classes they need.
Every other command's page is still typer's: those commands import far more anyway.
"""

from __future__ import annotations

import os
from typing import Any

# Typer's look, so the root page and a command's page read as one program's.
STYLE_USAGE = "yellow"
STYLE_NAME = "bold cyan"
STYLE_BORDER = "dim"


def _console() -> Any:
    from rich.console import Console

    # The environment typer's renderer honours: forced colour in CI logs, a fixed width.
    force = bool(
        os.environ.get("GITHUB_ACTIONS") or os.environ.get("FORCE_COLOR") or os.environ.get("PY_COLORS")
    )
    width = os.environ.get("TERMINAL_WIDTH")
    return Console(
        highlight=False,
        force_terminal=False if os.environ.get("_TYPER_FORCE_DISABLE_TERMINAL") else (force or None),
        width=int(width) if width and width.isdigit() else None,
    )


def _panel(title: str, rows: list[tuple[str, str]]) -> Any:
    from rich import box
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    table = Table.grid(padding=(0, 2))
    table.add_column(style=STYLE_NAME, no_wrap=True)
    table.add_column()
    for name, help_text in rows:
        # Text, never markup: a help text may hold brackets ("[default: 8]", "$(...)").
        table.add_row(Text(name), Text(help_text))
    return Panel(table, title=title, title_align="left", border_style=STYLE_BORDER, box=box.ROUNDED)


def _first_paragraph(text: str) -> str:
    # A docstring's first paragraph, its line breaks (source wrapping) read as spaces.
    return " ".join(text.strip().split("\n\n")[0].split())


def print_root_help(group: Any, ctx: Any) -> None:
    """The usage line, the group's help, then its options and its commands, each in a panel.

    ``group.get_command`` must answer without importing commands (LazyGroup's listing mode)."""
    from rich.padding import Padding
    from rich.text import Text

    console = _console()
    usage = Text()
    usage.append("Usage: ", style=STYLE_USAGE)
    usage.append(group.get_usage(ctx).removeprefix("Usage: "), style="bold")
    console.print(Padding(usage, 1))
    if group.help:
        console.print(Padding(Text(_first_paragraph(group.help)), (0, 1, 1, 1)))
    options = [
        record
        for param in group.get_params(ctx)
        if not getattr(param, "hidden", False) and (record := param.get_help_record(ctx)) is not None
    ]
    if options:
        console.print(_panel("Options", [(names, help_text) for names, help_text in options]))
    commands = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is not None and not command.hidden:
            commands.append((name, _first_paragraph(command.short_help or command.help or "")))
    if commands:
        console.print(_panel("Commands", commands))
