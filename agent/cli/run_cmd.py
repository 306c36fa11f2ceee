"""`proctor run` and `proctor quickstart`: the eval entry points."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from proctor.agent.cli import exit_codes
from proctor.agent.cli.app import app
from proctor.agent.errors import UserError
from proctor.agent.inputs.config import RunConfig
from proctor.agent.inputs.efforts import REASONING_EFFORTS
from proctor.agent.results.store import RUN_HEADER, SAMPLES, read_json
from proctor.agent.run.config_loader import RunFlags, load_run_config, read_config_file, split_task_ids
from proctor.agent.run.dry_run import build_plan, render_plan
from proctor.agent.run.error_policy import DEFAULT_ERROR_POLICY, ErrorPolicy
from proctor.agent.run.progress import RunProgress, print_final
from proctor.agent.run.runner import RunResult, execute_run
from proctor.agent.text.terminal import one_line
from proctor.sandbox import SandboxError

# The repository's configs/ (the package is installed from a checkout: `pip install -e .`).
CONFIGS_DIR = Path(__file__).resolve().parents[2] / "configs"
QUICKSTART_CONFIG = CONFIGS_DIR / "quickstart.yaml"

# The statuses of the one table `proctor --help` shows (exit_codes.py).
EXIT_INTERRUPTED = exit_codes.INTERRUPTED
EXIT_FAILED = exit_codes.FAILED
EXIT_TOO_MANY_ERRORS = exit_codes.TOO_MANY_ERRORS
EXIT_STOPPED = exit_codes.STOPPED


AUDIT_MODES = ("quick", "full")
RESUME_NEEDS_OUT = "--resume needs --out DIR, the run directory to continue"


def run_and_report(
    config: RunConfig,
    *,
    config_file: Path | None = None,
    audit: str | None = None,
    error_policy: ErrorPolicy = DEFAULT_ERROR_POLICY,
    preflight: bool = True,
    allow_endpoint_change: bool = False,
) -> None:
    """Run, print the summary and where the run is, and exit with the run's status."""
    console = Console()
    if not console.is_terminal:
        # Logs have no width; the default 80 columns would squeeze the summary table.
        console = Console(width=160)
    progress = RunProgress(console)
    try:
        result: RunResult = asyncio.run(
            execute_run(
                config,
                progress=progress,
                config_file=config_file,
                audit=audit,
                preflight=preflight,
                allow_endpoint_change=allow_endpoint_change,
            )
        )
    except SandboxError as exc:
        raise UserError(f"sandbox: {exc}") from None
    print_final(console, result.summary, str(result.run_dir))
    resume_hint = f"proctor run --resume --out {result.run_dir}"
    if result.status == "interrupted":
        console.print(
            f"interrupted: {result.finished} of {result.planned} samples finished and are kept; "
            f"resume with: {resume_hint}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(EXIT_INTERRUPTED)
    if result.harness_errors:
        console.print(
            f"{len(result.harness_errors)} sample(s) failed in the harness and are recorded as "
            f"harness_error (see their 'error' in {result.run_dir / SAMPLES}); after fixing the cause, "
            f"{resume_hint} runs them again",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    if result.status == "failed":
        raise typer.Exit(EXIT_FAILED)
    if result.stop is not None:
        console.print(
            f"proctor: {result.stop.status}: {one_line(result.stop.describe())}; {result.finished} of "
            f"{result.planned} samples finished and are kept; after fixing the cause, {resume_hint} "
            "runs the rest and the errors again",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(EXIT_STOPPED)
    overall = result.summary.get("overall") or {}
    error_counts = overall.get("errors") or {}
    errors = int(error_counts.get("total", 0))
    finished = int(result.summary.get("finished_samples", 0))
    if error_policy.breached(errors, finished):
        kinds = ", ".join(f"{name} {n}" for name, n in sorted(error_counts.items()) if name != "total" and n)
        console.print(
            f"proctor: {errors} of {finished} samples ended in errors ({kinds}) and are left out of "
            f"the scores above; exit {EXIT_TOO_MANY_ERRORS} because --fail-on-error fails on "
            f"{error_policy.describe()}; after fixing the cause, {resume_hint} runs the errors again "
            "(--fail-on-error N|F% tolerates some)",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(EXIT_TOO_MANY_ERRORS)


def _resume_base(flags: RunFlags) -> dict[str, Any] | None:
    """`proctor run --resume --out DIR` alone reuses the config recorded in DIR/run.json."""
    if not flags.resume or flags.out is None or flags.tasks is not None or flags.models:
        return None
    header_path = flags.out / RUN_HEADER
    if not header_path.exists():
        raise UserError(f"{header_path}: not found; nothing to resume (give --tasks and --model to start)")
    config = read_json(header_path).get("config")
    if not isinstance(config, dict):
        raise UserError(f"{header_path}: field 'config': missing; cannot resume from it")
    return config


@app.command("run")
def run_command(
    config_file: Annotated[
        Path | None, typer.Argument(metavar="[CONFIG.yaml]", help="Run config; flags override it.")
    ] = None,
    track: Annotated[str | None, typer.Option(help="frontiermath, olympiad, research or phybench.")] = None,
    tasks: Annotated[Path | None, typer.Option(help="Task file (JSONL, JSON or YAML).")] = None,
    model: Annotated[
        list[str] | None, typer.Option("--model", help="openai/NAME or local/gemma3-270m; repeatable.")
    ] = None,
    judge: Annotated[
        str | None, typer.Option(help="Judge model for judged tracks, e.g. openai/NAME.")
    ] = None,
    trials: Annotated[int | None, typer.Option(help="Trials per task.")] = None,
    max_concurrency: Annotated[int | None, typer.Option(help="Samples in flight at once.")] = None,
    out: Annotated[
        Path | None, typer.Option(help="Run directory (default runs/<time>-<track>-<model>).")
    ] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue the run in --out.")] = False,
    backend: Annotated[str | None, typer.Option(help="Sandbox backend: auto, docker, local or ray.")] = None,
    ray_address: Annotated[
        str | None, typer.Option(help="Ray cluster for --backend ray (host:port of its head).")
    ] = None,
    ray_allow_unauthenticated: Annotated[
        bool,
        typer.Option(
            "--ray-allow-unauthenticated",
            help="Use a Ray cluster without token authentication (recorded in run.json).",
        ),
    ] = False,
    runtime: Annotated[
        str | None, typer.Option(help="Container runtime of the docker backend: runc (default) or runsc.")
    ] = None,
    docker_host: Annotated[
        str | None, typer.Option(help="Docker engine socket, e.g. unix:///run/proctor-gvisor/docker.sock.")
    ] = None,
    reasoning_effort: Annotated[
        str | None,
        typer.Option(
            metavar="EFFORT", help=f"Reasoning effort for every model: {', '.join(REASONING_EFFORTS)}."
        ),
    ] = None,
    token_cap: Annotated[int | None, typer.Option(help="Token cap per sample (default 1,000,000).")] = None,
    force_submit_at: Annotated[
        int | None, typer.Option(help="Force submit_answer from this many tokens (default 660,000).")
    ] = None,
    limit_tasks: Annotated[
        str | None,
        typer.Option(
            "--limit",
            "--limit-tasks",
            metavar="N|A-B",
            help="Run only the first N selected tasks, or the A-th to B-th (1-based, inclusive).",
        ),
    ] = None,
    task_id: Annotated[
        list[str] | None,
        typer.Option(
            "--task-id",
            metavar="ID",
            help="Run only tasks whose id matches (glob: * ? [..]); repeatable or comma-separated.",
        ),
    ] = None,
    task_filter: Annotated[
        list[str] | None,
        typer.Option(
            "--filter",
            metavar="FIELD=VALUE",
            help="Run only tasks whose field holds VALUE (subject=physics, metadata.level=3); repeatable.",
        ),
    ] = None,
    model_setting: Annotated[
        list[str] | None,
        typer.Option(
            "-M",
            "--model-setting",
            metavar="KEY=VALUE",
            help="Set a model setting on every --model: temperature, top_p, seed, reasoning_effort, "
            "base_url, api_key_env, max_tokens, ... (docs/runs.md); repeatable.",
        ),
    ] = None,
    judge_setting: Annotated[
        list[str] | None,
        typer.Option(
            "--judge-setting",
            metavar="KEY=VALUE",
            help="Set a setting of the judge (the keys of -M but max_tokens); repeatable.",
        ),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Print the plan (samples, models, judge, backend, budget, maximum tokens) "
            "and exit: nothing is sent, run or written.",
        ),
    ] = False,
    audit: Annotated[
        str | None,
        typer.Option(help="Audit the sandbox first (quick or full); refuse to start if anything is broken."),
    ] = None,
    max_sandbox_concurrency: Annotated[
        int | None,
        typer.Option(
            help="Sandbox calls running at once, all samples together (default: the engine's CPUs)."
        ),
    ] = None,
    protocol: Annotated[
        str | None,
        typer.Option(
            help="FrontierMath conversation rules: methodology (default) or inspect-example "
            "(docs/frontiermath.md, 'Protocol profiles')."
        ),
    ] = None,
    fail_on_error: Annotated[
        str | None,
        typer.Option(
            help="Exit 3 when error samples reach a count (5) or pass a fraction (0.2, 20%; "
            "1.0 never); default: any error sample."
        ),
    ] = None,
    preflight: Annotated[
        bool,
        typer.Option(
            "--preflight/--no-preflight",
            help="Send one tiny request to every model and judge endpoint before the run (default).",
        ),
    ] = True,
    allow_endpoint_change: Annotated[
        bool,
        typer.Option(
            "--allow-endpoint-change",
            help="Let --resume continue against another base URL (recorded in run.json).",
        ),
    ] = False,
) -> None:
    """Run an eval: every model x task x trial, appended to DIR/samples.jsonl as each finishes.

    Exit status: 0 finished; 1 the harness failed; 2 bad input, nothing ran; 3 error samples
    crossed --fail-on-error; 4 an endpoint refused for good (key, quota); 130 interrupted.
    Every command's codes: proctor --help.
    """
    if audit is not None and audit not in AUDIT_MODES:
        raise UserError(f"--audit: {audit!r} is not one of {', '.join(AUDIT_MODES)}")
    error_policy = DEFAULT_ERROR_POLICY if fail_on_error is None else ErrorPolicy.parse(fail_on_error)
    flags = RunFlags(
        track=track,
        tasks=tasks,
        models=list(model or []),
        judge=judge,
        trials=trials,
        max_concurrency=max_concurrency,
        out=out,
        resume=resume,
        backend=backend,
        ray_address=ray_address,
        ray_allow_unauthenticated=True if ray_allow_unauthenticated else None,
        runtime=runtime,
        docker_host=docker_host,
        max_sandbox_concurrency=max_sandbox_concurrency,
        reasoning_effort=reasoning_effort,
        token_cap=token_cap,
        force_submit_at=force_submit_at,
        limit_tasks=limit_tasks,
        protocol=protocol,
        task_ids=split_task_ids(task_id or []),
        filters=list(task_filter or []),
        model_settings=list(model_setting or []),
        judge_settings=list(judge_setting or []),
    )
    if resume and out is None and config_file is None:
        # Before the config is read: without a run directory there is nothing to continue, and
        # asking for a task file first would send the user the wrong way.
        raise UserError(RESUME_NEEDS_OUT)
    base = _resume_base(flags) if config_file is None else None
    source = str(flags.out / RUN_HEADER) if base is not None and flags.out is not None else None
    config = load_run_config(config_file, flags, base=base, source=source)
    if config.resume and config.out is None:
        raise UserError(RESUME_NEEDS_OUT)
    if dry_run:
        print(render_plan(build_plan(config)))
        return
    run_and_report(
        config,
        config_file=config_file,
        audit=audit,
        error_policy=error_policy,
        preflight=preflight,
        allow_endpoint_change=allow_endpoint_change,
    )


def quickstart_config(model: str | None, out: Path | None, backend: str | None) -> RunConfig:
    """The shipped quickstart, optionally pointed at a real model with protocol-default limits."""
    data = read_config_file(QUICKSTART_CONFIG)
    flags = RunFlags(out=out, backend=backend)
    if model is not None:
        provider = model.split("/", 1)[0]
        if provider == "openai" and not os.environ.get("OPENAI_API_KEY"):
            raise UserError(f"--model {model}: set OPENAI_API_KEY (and OPENAI_BASE_URL for other endpoints)")
        flags.models = [model]
        # The shipped entry is tuned for the local server (1 connection, 1 retry); a model named
        # here replaces it instead of inheriting those settings.
        data.pop("models", None)
        if provider != "local":
            # A frontier model gets the benchmark's own limits, not the tiny local-model ones,
            # and runs the three tasks at once (the local server has a single slot).
            data.pop("budget", None)
            data["max_concurrency"] = 3
    return _from_data(data, flags)


def _from_data(data: dict[str, Any], flags: RunFlags) -> RunConfig:
    for name in ("tasks", "prompt_template"):
        if isinstance(data.get(name), str) and not Path(data[name]).is_absolute():
            data[name] = str(QUICKSTART_CONFIG.parent / data[name])
    return load_run_config(None, flags, base=data, source=str(QUICKSTART_CONFIG))


@app.command("quickstart")
def quickstart_command(
    model: Annotated[
        str | None, typer.Option(help="Default local/gemma3-270m (no API key); or openai/NAME with a key.")
    ] = None,
    out: Annotated[Path | None, typer.Option(help="Run directory.")] = None,
    backend: Annotated[str | None, typer.Option(help="Sandbox backend: auto, docker or local.")] = None,
) -> None:
    """A real FrontierMath-style eval on three shipped tasks; no API key needed."""
    config = quickstart_config(model, out, backend)
    run_and_report(config, config_file=QUICKSTART_CONFIG)
