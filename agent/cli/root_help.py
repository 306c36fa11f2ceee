"""`proctor --help` and `proctor --version`: the root's answers, without typer.

Both answer before typer is imported (agent/cli/__init__.py), from the texts here and the
command table (command_table.py); app.py builds the typer root from the same texts, and
tests/cli/test_lazy_cli.py checks that typer's root gives the same page. Typer's import is
~0.1 s of CPU; its rich help renderer (typer.rich_utils) imports rich's Markdown (markdown-it),
Syntax (pygments) and Traceback, for markup modes and pretty tracebacks this CLI does not use,
~0.15 s more. The page is drawn here, laid out as typer's pages are, with the few rich classes
it needs. Every other command's page is still typer's: those commands import far more anyway.
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple

from proctor.agent.cli.command_table import COMMANDS, GROUPS, docstring
from proctor.agent.cli.exit_codes import EXIT_TABLE

ROOT_HELP = "Sandboxed code-execution agent runtime for expert-level math and science evaluations."
VERSION_HELP = "Print the version and exit."
# Click's own text for --help, which typer keeps.
HELP_HELP = "Show this message and exit."
GROUP_HELP = {
    "sandbox": "Run programs in the sandbox and clean up after crashed runs.",
    "image": "Build the pinned sandbox image.",
    "bench": "Benchmarks (not timed tests): sandbox, loop, eed, submission.",
    "score": "Deterministic scorers.",
    "list": "List tracks, and the tasks and subjects of a task file.",
}
ROOT_USAGE = "proctor [OPTIONS] COMMAND [ARGS]..."

# Typer's look, so the root page and a command's page read as one program's.
STYLE_USAGE = "yellow"
STYLE_NAME = "bold cyan"
STYLE_BORDER = "dim"


def proctor_version() -> str:
    """The installed distribution's version (package metadata), or say it is not installed."""
    import importlib.metadata  # only here: every other command would pay for it at startup

    try:
        return importlib.metadata.version("proctor")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed: pip install -e .)"


class RootPage(NamedTuple):  # not a dataclass: importing dataclasses costs --version 0.01 s
    usage: str
    help: str
    options: list[tuple[str, str]]
    commands: list[tuple[str, str]]
    # Every command's exit statuses (exit_codes.py): one table, not a line in each command's page.
    exit_statuses: list[tuple[str, str]]


def first_paragraph(text: str) -> str:
    # A docstring's first paragraph, its line breaks (source wrapping) read as spaces.
    return " ".join(text.strip().split("\n\n")[0].split())


def static_page() -> RootPage:
    """The root page from the texts and the command table: no typer, no command imported."""
    return RootPage(
        usage=ROOT_USAGE,
        help=first_paragraph(ROOT_HELP),
        options=[("--version", VERSION_HELP), ("--help", HELP_HELP)],
        commands=[
            *((name, first_paragraph(docstring(module, name))) for name, module in COMMANDS.items()),
            *((name, first_paragraph(GROUP_HELP[name])) for name in GROUPS),
        ],
        exit_statuses=list(EXIT_TABLE),
    )


def page_of(group: Any, ctx: Any) -> RootPage:
    """The root page from typer's root group; ``group.get_command`` must answer without
    importing commands (LazyGroup's listing mode)."""
    options = [
        record
        for param in group.get_params(ctx)
        if not getattr(param, "hidden", False) and (record := param.get_help_record(ctx)) is not None
    ]
    commands = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is not None and not command.hidden:
            commands.append((name, first_paragraph(command.short_help or command.help or "")))
    return RootPage(
        usage=group.get_usage(ctx).removeprefix("Usage: "),
        help=first_paragraph(group.help or ""),
        options=[(names, help_text) for names, help_text in options],
        commands=commands,
        exit_statuses=list(EXIT_TABLE),
    )


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


def print_page(page: RootPage) -> None:
    """The usage line, the help, then the options, the commands and the exit statuses, each in a panel."""
    from rich.padding import Padding
    from rich.text import Text

    console = _console()
    usage = Text()
    usage.append("Usage: ", style=STYLE_USAGE)
    usage.append(page.usage, style="bold")
    console.print(Padding(usage, 1))
    if page.help:
        console.print(Padding(Text(page.help), (0, 1, 1, 1)))
    if page.options:
        console.print(_panel("Options", page.options))
    if page.commands:
        console.print(_panel("Commands", page.commands))
    if page.exit_statuses:
        console.print(_panel("Exit status", page.exit_statuses))
