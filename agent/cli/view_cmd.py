"""`proctor view` (offline HTML report of a run) and `proctor compare` (paired comparison)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from proctor.agent.cli.app import app
from proctor.agent.errors import UserError
from proctor.agent.report.compare import compare_runs, comparison_json
from proctor.agent.report.compare_view import print_comparison, render_comparison
from proctor.agent.report.loader import load_run
from proctor.agent.report.page import render_report
from proctor.agent.report.serve import make_server
from proctor.agent.results.store import refuse_run_file, write_text_atomically


def _write(path: Path, text: str, option: str) -> Path:
    """Write a page where it cannot destroy anything it was not meant to replace: never over a
    run directory's own files, and never through a link (the default, RUN/report.html, is in a
    directory anyone may have edited: a link planted there had the page written over its
    target); replaced in one step, so an interrupted write leaves the old page or the new one."""
    refuse_run_file(path, option)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{path}: cannot write the page ({exc.strerror or exc})") from None
    write_text_atomically(path, text)
    return path


@app.command("view")
def view(
    run_dir: Annotated[Path, typer.Argument(help="Run directory holding samples.jsonl and run.json.")],
    out: Annotated[
        Path | None, typer.Option("--out", help="Where to write the page [RUN_DIR/report.html].")
    ] = None,
    serve: Annotated[
        bool, typer.Option("--serve", help="Also serve the page on 127.0.0.1 until Ctrl-C.")
    ] = False,
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="Port for --serve; 0 picks a free one.")
    ] = 8765,
) -> None:
    """Write a self-contained, offline HTML report of a run: summary, plots, transcripts."""
    run = load_run(run_dir)
    page = _write(out or run_dir / "report.html", render_report(run), "--out")
    typer.echo(str(page))
    if not serve:
        return
    try:
        server = make_server(page, port)
    except OSError as exc:
        raise UserError(f"--port {port}: cannot listen on 127.0.0.1 ({exc.strerror or exc})") from None
    # server_port is the bound one, which matters when --port 0 let the OS choose.
    typer.echo(f"serving at http://127.0.0.1:{server.server_port}/ (Ctrl-C to stop)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


# Wide enough for any name a run holds; a pipe is read by programs, not by a window.
PIPE_WIDTH = 10_000


@app.command("compare")
def compare(
    run_dirs: Annotated[
        list[Path], typer.Argument(help="Run directories; the first model of the first is the baseline.")
    ],
    html: Annotated[Path | None, typer.Option("--html", help="Also write the comparison as a page.")] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the comparison as one JSON object instead of tables.")
    ] = False,
) -> None:
    """Compare models or runs side by side, per task and per subject, with paired differences."""
    comparison = compare_runs([load_run(path) for path in run_dirs])
    if as_json:
        print(json.dumps(comparison_json(comparison), ensure_ascii=False, sort_keys=False))
    else:
        console = Console()
        if not console.is_terminal:
            # A pipe has no width: rich's default 80 columns would cut task names ("frontierm…").
            # Tables size to their content, so a wide console prints every name whole.
            console = Console(width=PIPE_WIDTH)
        print_comparison(comparison, console)
    if html is not None:
        typer.echo(str(_write(html, render_comparison(comparison), "--html")))
