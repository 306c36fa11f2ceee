"""`proctor validate`: run every task's reference_solution through the real submission path."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from proctor.agent.cli import exit_codes
from proctor.agent.cli.app import app
from proctor.agent.errors import UserError
from proctor.agent.inputs.config import SandboxConfig
from proctor.agent.text.terminal import escape_for_terminal
from proctor.agent.tracks.frontiermath.tasks import load_frontiermath_tasks
from proctor.agent.tracks.frontiermath.validation import ReferenceCheck, check_references
from proctor.sandbox import SandboxError, SandboxSpec, open_sandbox

EXIT_REFERENCE_FAILED = exit_codes.FAILED


async def _run_checks(
    tasks_path: Path, backend: str, image: str | None, config: SandboxConfig, concurrency: int
) -> tuple[list[ReferenceCheck], dict[str, object]]:
    tasks = load_frontiermath_tasks(tasks_path)
    try:
        # References never read the library list: skip the local backend's import probe.
        spec = SandboxSpec(backend=backend, image=image, pool_size=min(concurrency, 4), probe_libraries=False)
        sandbox = await open_sandbox(spec)
    except SandboxError as exc:
        raise UserError(f"sandbox: {exc}") from None
    warning = sandbox.describe().get("warning")
    if warning:
        print(f"proctor: {warning}", file=sys.stderr, flush=True)
    try:
        return await check_references(tasks, sandbox, config, concurrency=concurrency), sandbox.describe()
    finally:
        await sandbox.aclose()


def _print_table(checks: list[ReferenceCheck], described: dict[str, object]) -> None:
    console = Console(width=None if sys.stdout.isatty() else 160)
    table = Table(title=f"reference solutions ({described.get('backend')} sandbox)")
    table.add_column("task")
    table.add_column("result")
    table.add_column("answer kind", overflow="fold")
    table.add_column("seconds", justify="right")
    table.add_column("detail", overflow="fold")
    for check in checks:
        status = (
            "pass"
            if check.passed
            else "unchecked"
            if not check.checked
            else "inexact reference"
            if check.inexact_reference
            else str(check.outcome)
        )
        detail = "" if check.passed else (check.error or "").strip().splitlines()[-1:] or [""]
        # Text: a task id (the task file's) and the failure (the sandbox's output) are data,
        # never rich markup ("[/x]" would raise MarkupError) nor terminal control.
        table.add_row(
            Text(escape_for_terminal(check.task_id)),
            status,
            Text(f"{check.answer_kind} ({check.answer_kind_origin})"),
            f"{check.duration_s:.1f}",
            Text(escape_for_terminal(detail[0] if detail else "")),
        )
    console.print(table)
    failed = [c.task_id for c in checks if c.checked and not c.passed]
    passed = sum(c.passed for c in checks)
    console.print(f"{passed} passed, {len(failed)} failed, {sum(not c.checked for c in checks)} unchecked")
    if failed:
        console.print("failing references: " + ", ".join(failed), markup=False, highlight=False)


@app.command("validate")
def validate(
    tasks: Annotated[Path, typer.Option("--tasks", help="Task file (JSONL, JSON list or YAML list).")],
    backend: Annotated[
        str, typer.Option("--backend", help="Sandbox backend: auto, docker or local.")
    ] = "auto",
    image: Annotated[str | None, typer.Option("--image", help="Sandbox image (docker backend).")] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print one JSON object instead of a table.")
    ] = False,
    answer_timeout: Annotated[float, typer.Option("--answer-timeout", help="Seconds for answer().")] = 30.0,
    verify_timeout: Annotated[
        float, typer.Option("--verify-timeout", help="Seconds for verification.")
    ] = 60.0,
    concurrency: Annotated[int, typer.Option("--concurrency", help="References checked at once.")] = 2,
    require_reference: Annotated[
        bool,
        typer.Option("--require-reference", help="Count tasks without a reference_solution as failures."),
    ] = False,
) -> None:
    """Run each task's reference_solution through the submission path; list the tasks whose reference fails.

    Exit status: 0 when every reference passes, 1 when any fails, 2 for bad input.
    """
    if backend not in ("auto", "docker", "local"):
        raise UserError(f"--backend: unknown backend {backend!r}; choose auto, docker or local")
    if answer_timeout <= 0 or verify_timeout <= 0 or concurrency < 1:
        raise UserError("--answer-timeout and --verify-timeout must be positive, --concurrency at least 1")
    config = SandboxConfig.model_validate(
        {"backend": backend, "answer_timeout_s": answer_timeout, "verify_timeout_s": verify_timeout}
    )
    checks, described = asyncio.run(_run_checks(tasks, backend, image, config, concurrency))
    failed = [c for c in checks if (c.checked and not c.passed) or (require_reference and not c.checked)]
    if json_output:
        report = {
            "tasks_file": str(tasks),
            "sandbox": {
                "backend": described.get("backend"),
                "image": described.get("image_id") or described.get("image"),
            },
            "total": len(checks),
            "passed": sum(c.passed for c in checks),
            "failed": [c.task_id for c in failed],
            "unchecked": [c.task_id for c in checks if not c.checked],
            "results": [
                {
                    "id": c.task_id,
                    "outcome": c.outcome.value if c.outcome else None,
                    "passed": c.passed,
                    "inexact_reference": c.inexact_reference,
                    "answer_kind": c.answer_kind,
                    "answer_kind_origin": c.answer_kind_origin,
                    "error": c.error,
                    "value": c.value,
                    "duration_s": round(c.duration_s, 3),
                }
                for c in checks
            ],
        }
        print(json.dumps(report, indent=2))
    else:
        _print_table(checks, described)
    if failed:
        raise typer.Exit(EXIT_REFERENCE_FAILED)
