"""`proctor rescore RUN`: grade a run's stored answers again, into a new run directory."""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from proctor.agent.cli import exit_codes
from proctor.agent.cli.app import app
from proctor.agent.errors import UserError
from proctor.agent.results.store import SAMPLES, load_samples
from proctor.agent.run.progress import RunProgress, print_final
from proctor.agent.text.terminal import one_line
from proctor.sandbox import SandboxError

# The statuses of the one table `proctor --help` shows (exit_codes.py).
EXIT_INTERRUPTED = exit_codes.INTERRUPTED
EXIT_FAILED = exit_codes.FAILED
# A judge refused the key or ran out of quota: as for `proctor run`.
EXIT_STOPPED = exit_codes.STOPPED


@app.command("rescore")
def rescore_command(
    run: Annotated[Path, typer.Argument(metavar="RUN", help="The run directory to re-score (only read).")],
    judge: Annotated[
        str | None, typer.Option(help="A new judge model (olympiad, research), e.g. openai/NAME.")
    ] = None,
    judge_base_url: Annotated[
        str | None, typer.Option(help="The judge's endpoint (default: OPENAI_BASE_URL).")
    ] = None,
    judge_key_env: Annotated[
        str | None,
        typer.Option(help="Variable holding the judge's key (default OPENAI_API_KEY)."),
    ] = None,
    judge_effort: Annotated[str | None, typer.Option(help="The judge's reasoning effort.")] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            help="A run config whose judge, tasks, track_options, sandbox and max_concurrency "
            "replace the run's (its other fields are ignored)."
        ),
    ] = None,
    tasks: Annotated[
        Path | None, typer.Option(help="Tasks file to grade against (default: the run's, as it is now).")
    ] = None,
    backend: Annotated[
        str | None, typer.Option(help="Sandbox backend for FrontierMath: auto, docker or local.")
    ] = None,
    max_concurrency: Annotated[int | None, typer.Option(help="Samples graded at once.")] = None,
    out: Annotated[
        Path | None, typer.Option(help="New run directory (default RUN-rescore-<time> beside RUN).")
    ] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue the re-score in --out.")] = False,
) -> None:
    """Grade the stored answers again (new judge, fixed endpoint, fixed verification) without
    calling the answering model; the result is a new run directory linked to RUN."""
    from proctor.agent.rescore.changes import describe_moves, outcome_moves
    from proctor.agent.rescore.engine import Rescorer, default_out
    from proctor.agent.rescore.settings import RescoreFlags, rescore_config
    from proctor.agent.rescore.stored_run import load_stored_run

    if resume and out is None:
        raise UserError("--resume: give --out DIR, the re-score to continue")
    stored = load_stored_run(run)
    flags = RescoreFlags(
        judge=judge,
        judge_base_url=judge_base_url,
        judge_key_env=judge_key_env,
        judge_effort=judge_effort,
        tasks=tasks,
        backend=backend,
        max_concurrency=max_concurrency,
    )
    settings = rescore_config(stored, config, flags)
    target = out or default_out(run)
    console = Console() if Console().is_terminal else Console(width=160)
    rescorer = Rescorer(
        stored, settings, target, resume=resume, progress=RunProgress(console), config_file=config
    )
    try:
        result = asyncio.run(rescorer.run())
    except SandboxError as exc:
        raise UserError(f"sandbox: {exc}") from None
    print_final(console, result.summary, str(result.run_dir))
    header_note = f"re-scored {result.rescored_now} sample(s) of {stored.directory} into {result.run_dir}"
    console.print(header_note, markup=False, highlight=False, soft_wrap=True)
    if (result.run_dir / SAMPLES).exists():
        compared, moves = outcome_moves(
            (sample.record for sample in stored.samples), load_samples(result.run_dir / SAMPLES).records
        )
        # Task ids come from a task file: shown, never obeyed by the terminal.
        console.print(
            one_line(describe_moves(compared, moves)), markup=False, highlight=False, soft_wrap=True
        )
    stopped = result.status.startswith("stopped")
    if result.status == "interrupted" or stopped:
        # The same grading options, or --resume refuses the changed judge, tasks or options.
        given = {
            "--judge": judge,
            "--judge-base-url": judge_base_url,
            "--judge-key-env": judge_key_env,
            "--judge-effort": judge_effort,
            "--config": config,
            "--tasks": tasks,
            "--backend": backend,
        }
        words = ["proctor", "rescore", str(run)]
        for flag, value in given.items():
            if value is not None:
                words += [flag, str(value)]
        hint = shlex.join([*words, "--resume", "--out", str(result.run_dir)])
        # A judge that refused the key or ran out of quota stops the re-score as it stops a run.
        why = result.status if stopped else "interrupted"
        console.print(
            f"{why}: {result.finished} of {result.planned} samples are kept; resume with: {hint}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(EXIT_STOPPED if stopped else EXIT_INTERRUPTED)
    if result.status == "failed":
        raise typer.Exit(EXIT_FAILED)
