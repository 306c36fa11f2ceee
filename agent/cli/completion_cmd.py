"""`proctor completion SHELL`: the script that makes the shell complete proctor's commands and
options (typer's own scripts; agent/cli/__init__.py answers them)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from proctor.agent.cli import COMPLETE_VAR
from proctor.agent.cli.app import app

PROG_NAME = "proctor"


class Shell(StrEnum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


def completion_script(shell: Shell) -> str:
    # Typer's scripts, so the shell speaks the protocol typer's completion classes answer.
    from typer._completion_shared import get_completion_script

    return get_completion_script(prog_name=PROG_NAME, complete_var=COMPLETE_VAR, shell=shell.value)


@app.command("completion")
def completion_command(
    shell: Annotated[
        Shell, typer.Argument(metavar="SHELL", help="The shell to complete in.", case_sensitive=False)
    ],
) -> None:
    """Print the script that makes bash, zsh or fish complete proctor's commands and options.

    bash: eval "$(proctor completion bash)" in ~/.bashrc.
    zsh: eval "$(proctor completion zsh)" in ~/.zshrc, after compinit.
    fish: proctor completion fish > ~/.config/fish/completions/proctor.fish
    """
    print(completion_script(shell))
