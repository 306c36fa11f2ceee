"""`proctor export RUN --format inspect`: a run in another tool's log format."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from proctor.agent.cli.app import app
from proctor.agent.errors import UserError

FORMATS = ("inspect",)


@app.command("export")
def export_command(
    run: Annotated[Path, typer.Argument(metavar="RUN", help="The run directory to export (only read).")],
    format: Annotated[str, typer.Option("--format", help="inspect: an Inspect AI eval log.")] = "inspect",
    output: Annotated[
        Path | None,
        typer.Option(
            "-o",
            "--output",
            help="Log file, .eval or .json (default ./RUN_ID.eval); a run with several models "
            "writes one file per model, named FILE.MODEL.eval.",
        ),
    ] = None,
) -> None:
    """Write a run as an Inspect AI eval log that `inspect view` opens."""
    if format not in FORMATS:
        raise UserError(f"--format: {format!r} is not one of {', '.join(FORMATS)}")
    from proctor.agent.export.inspect_log import export_inspect

    for path in export_inspect(run, output):
        print(path)
