"""The typer applications every command module registers on."""

import atexit
from typing import Annotated

import typer

from proctor.agent.cli import help_types
from proctor.agent.cli.commands_registry import LazyGroup
from proctor.agent.cli.root_help import GROUP_HELP, ROOT_HELP, VERSION_HELP, proctor_version

help_types.install()

app = typer.Typer(
    name="proctor",
    # Commands are imported when asked for (commands_registry.py): --version and --help stay fast.
    cls=LazyGroup,
    # The texts are root_help.py's: `proctor --help` shows them without building this app.
    help=ROOT_HELP,
    no_args_is_help=True,
    # Completion scripts come from `proctor completion SHELL` (completion_cmd.py): one per shell,
    # named, instead of two root options that guess the shell.
    add_completion=False,
    pretty_exceptions_enable=False,
)
sandbox_app = typer.Typer(help=GROUP_HELP["sandbox"], no_args_is_help=True)
image_app = typer.Typer(help=GROUP_HELP["image"], no_args_is_help=True)
bench_app = typer.Typer(help=GROUP_HELP["bench"], no_args_is_help=True)
score_app = typer.Typer(help=GROUP_HELP["score"], no_args_is_help=True)
# `proctor list` alone lists what it can list (list_cmd.py), not a usage error.
list_app = typer.Typer(help=GROUP_HELP["list"], invoke_without_command=True)

# Bounded: a slow engine never holds a command's exit for longer than this.
SWEEP_JOIN_S = 3.0


def _print_version(value: bool) -> None:
    if value:
        print(f"proctor {proctor_version()}")
        raise typer.Exit(0)


@app.callback()
def sweep_leftovers(
    version: Annotated[
        bool,
        typer.Option("--version", is_eager=True, callback=_print_version, help=VERSION_HELP),
    ] = False,
) -> None:
    """Every command first removes, in the background, sandbox containers that stopped after
    their controlling process was killed (sandbox/docker/cleanup.py: never a live run's)."""
    from proctor.sandbox.docker.cleanup import start_background_sweep

    atexit.register(start_background_sweep().join, SWEEP_JOIN_S)


app.add_typer(sandbox_app, name="sandbox")
app.add_typer(image_app, name="image")
app.add_typer(bench_app, name="bench")
app.add_typer(score_app, name="score")
app.add_typer(list_app, name="list")
