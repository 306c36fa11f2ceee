"""`proctor list tracks|tasks FILE|subjects FILE`: what there is to run, before running it.

Plain lines, one item each, tab-separated, so they read in a terminal and pipe into grep, cut
or wc. Task files are untrusted: every value printed is shown, never obeyed, and cannot add a
line or a column (controls, bidi marks, tab and newline are spelled out).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer

from proctor.agent.cli.app import list_app
from proctor.agent.text.terminal import escape_for_terminal

TRACK_HELP = "The track whose loader reads FILE: frontiermath (default), olympiad, research or phybench."


def _cell(value: object) -> str:
    return escape_for_terminal(str(value)).replace("\t", "\\t").replace("\n", "\\n")


def _load(path: Path, track: str) -> list[Any]:
    from proctor.agent.tracks.registry import make_track

    return make_track(track).load_tasks(path)


@list_app.callback()
def list_what(ctx: typer.Context) -> None:
    # No docstring: the group's help is app.py's (GROUP_HELP), as the root page shows it.
    if ctx.invoked_subcommand is not None:
        return
    # `proctor list` alone: the lists there are, one a line, as every list here prints.
    group = ctx.command
    for name in group.list_commands(ctx):  # type: ignore[attr-defined]
        command = group.get_command(ctx, name)  # type: ignore[attr-defined]
        arguments = [
            param.metavar or (param.name or "").upper() for param in command.params if param.required
        ]
        usage = " ".join([name, *arguments])
        print(f"proctor list {usage}\t{first_line(command.help or '')}")


def first_line(text: str) -> str:
    return " ".join(text.strip().split("\n\n")[0].split())


@list_app.command("tracks")
def list_tracks() -> None:
    """Every track: how it is graded and whether it runs model code in the sandbox."""
    from proctor.agent.tracks.registry import make_track, track_names

    for name in track_names():
        track = make_track(name)
        graded = "a judge model" if track.needs_judge else "a deterministic check"
        sandbox = "sandbox" if track.needs_sandbox else "no sandbox"
        print(f"{name}\tgraded by {graded}\t{sandbox}")


@list_app.command("tasks")
def list_tasks(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="Task file (JSONL, JSON or YAML).")],
    track: Annotated[str, typer.Option(help=TRACK_HELP)] = "frontiermath",
) -> None:
    """Each task's id and subject, in file order (what --task-id and --filter select from)."""
    for task in _load(file, track):
        subject = getattr(task, "subject", None)
        print(f"{_cell(task.id)}\t{_cell(subject) if subject is not None else '-'}")


@list_app.command("subjects")
def list_subjects(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="Task file (JSONL, JSON or YAML).")],
    track: Annotated[str, typer.Option(help=TRACK_HELP)] = "frontiermath",
) -> None:
    """Each subject with its number of tasks, most first (values for --filter subject=...)."""
    counts = Counter(getattr(task, "subject", None) for task in _load(file, track))
    for subject, count in counts.most_common():
        print(f"{count}\t{_cell(subject) if subject is not None else '(none)'}")
