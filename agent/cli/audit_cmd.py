"""`proctor sandbox audit`: probes and attacks against this machine's sandbox, one row per check."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console

from proctor.agent.audit import AuditReport, audit_sandbox
from proctor.agent.audit.model import Row
from proctor.agent.audit.render import print_table, write_html, write_json
from proctor.agent.cli.app import sandbox_app
from proctor.agent.errors import UserError
from proctor.agent.inputs.config import SandboxConfig
from proctor.agent.inputs.run_config_loader import format_validation_error, parse_size, read_config_file
from proctor.sandbox import Limits, Sandbox, SandboxUnavailable, open_sandbox
from proctor.sandbox.runtimes import RUNTIMES

AUDIT_BACKENDS = ("auto", "docker", "local", "ray")
EXIT_BROKEN = 1


def limits_from_config(path: Path) -> tuple[SandboxConfig, Limits]:
    """The sandbox section of a run config, and the limits an eval with it would get."""
    data = read_config_file(path)
    section = data.get("sandbox") or {}
    if not isinstance(section, dict):
        raise UserError(f"{path}: field 'sandbox': expected a mapping")
    try:
        config = SandboxConfig.model_validate(section)
    except ValidationError as exc:
        raise UserError(format_validation_error(f"{path}", exc, SandboxConfig, prefix="sandbox.")) from None
    try:
        memory = parse_size(config.memory)
    except ValueError as exc:
        raise UserError(f"{path}: field 'sandbox.memory': {exc}") from None
    return config, Limits(memory_bytes=memory, cpus=config.cpus)


def check_runtime(
    runtime: str | None, backend: str, docker_host: str | None = None, ray_address: str | None = None
) -> None:
    """Refuse, in one line, a runtime this Proctor does not know or a backend that has none.

    Whether an engine offers it is settled when the sandbox opens (one line too). A ray worker
    uses its own node's engine and runtime, so ray refuses both flags as local does.
    """
    if runtime is not None and runtime not in RUNTIMES:
        raise UserError(f"--runtime: {runtime!r} is not one of {', '.join(RUNTIMES)}")
    if backend in ("local", "ray") and (runtime is not None or docker_host is not None):
        flag = "--runtime" if runtime is not None else "--docker-host"
        raise UserError(f"{flag}: applies to the docker backend only")
    if ray_address is not None and backend != "ray":
        raise UserError("--ray-address: applies to the ray backend only")


async def open_audited_sandbox(
    backend: str,
    image: str | None,
    pool_size: int,
    limits: Limits,
    runtime: str | None = None,
    docker_host: str | None = None,
    ray_address: str | None = None,
    ray_allow_unauthenticated: bool = False,
) -> Sandbox:
    """The sandbox under audit, opened as an eval opens it. Tests swap this for weakened ones."""
    if ray_allow_unauthenticated:
        return await open_sandbox(
            backend,
            image=image,
            pool_size=pool_size,
            default_limits=limits,
            ray_address=ray_address,
            ray_allow_unauthenticated=True,
        )
    return await open_sandbox(
        backend,
        image=image,
        pool_size=pool_size,
        default_limits=limits,
        runtime=runtime,
        docker_host=docker_host,
        ray_address=ray_address,
    )


async def _audit(
    backend: str,
    image: str | None,
    pool_size: int,
    limits: Limits,
    quick: bool,
    runtime: str | None,
    only: list[str] | None,
    docker_host: str | None = None,
    ray_address: str | None = None,
    ray_allow_unauthenticated: bool = False,
) -> AuditReport:
    try:
        if ray_allow_unauthenticated:
            sandbox = await open_audited_sandbox(
                backend, image, pool_size, limits, ray_address=ray_address, ray_allow_unauthenticated=True
            )
        elif ray_address:
            sandbox = await open_audited_sandbox(backend, image, pool_size, limits, ray_address=ray_address)
        elif runtime or docker_host:
            sandbox = await open_audited_sandbox(backend, image, pool_size, limits, runtime, docker_host)
        else:
            sandbox = await open_audited_sandbox(backend, image, pool_size, limits)
    except SandboxUnavailable as exc:
        raise UserError(f"--{'runtime' if runtime else 'backend'} {runtime or backend}: {exc}") from None
    total: dict[str, int] = {"done": 0}

    def progress(row: Row) -> None:
        total["done"] += 1
        where = f"  [{row.node}]" if row.node is not None else ""
        print(f"  {row.verdict.value:>7}  {row.id}{where}", file=sys.stderr, flush=True)

    try:
        return await audit_sandbox(sandbox, limits, quick=quick, runtime=runtime, only=only, on_row=progress)
    finally:
        await sandbox.aclose()


@sandbox_app.command("audit")
def audit_command(
    backend: Annotated[str, typer.Option(help="auto, docker, local or ray.")] = "auto",
    ray_address: Annotated[
        str | None,
        typer.Option(help="Ray cluster for --backend ray (default: RAY_ADDRESS or auto); audits every node."),
    ] = None,
    ray_allow_unauthenticated: Annotated[
        bool,
        typer.Option("--ray-allow-unauthenticated", help="Audit a Ray cluster without token authentication."),
    ] = False,
    runtime: Annotated[
        str | None, typer.Option(help="Container runtime to audit: runc (default) or runsc.")
    ] = None,
    docker_host: Annotated[
        str | None, typer.Option(help="Docker engine socket (default: the environment's).")
    ] = None,
    image: Annotated[str | None, typer.Option(help="Sandbox image (default: the pinned image).")] = None,
    limits_from: Annotated[
        Path | None, typer.Option("--limits-from", help="Take the sandbox limits from this run config.")
    ] = None,
    json_file: Annotated[
        Path | None, typer.Option("--json", help="Write the report as JSON to FILE.")
    ] = None,
    html_file: Annotated[
        Path | None, typer.Option("--html", help="Write a standalone HTML report to FILE.")
    ] = None,
    quick: Annotated[bool, typer.Option("--quick", help="A subset that runs in under 20 s.")] = False,
    only: Annotated[
        list[str] | None, typer.Option("--only", hidden=True, help="Run only these check IDs.")
    ] = None,
) -> None:
    """Probe and attack the sandbox through the path evals use; exit 1 when anything is broken."""
    if backend not in AUDIT_BACKENDS:
        raise UserError(f"--backend: {backend!r} is not one of {', '.join(AUDIT_BACKENDS)}")
    pool_size = 2
    limits = Limits()
    if limits_from is not None:
        config, limits = limits_from_config(limits_from)
        image = image or config.image
        pool_size = config.pool_size or 2
        if config.runtime != "runc" and runtime is None:
            runtime = config.runtime
        docker_host = docker_host or config.docker_host
        if backend == "ray":
            ray_address = ray_address or config.ray_address
            ray_allow_unauthenticated = ray_allow_unauthenticated or config.ray_allow_unauthenticated
    check_runtime(runtime, backend, docker_host, ray_address)
    for flag, path in (("--json", json_file), ("--html", html_file)):
        if path is not None and not path.parent.is_dir():
            raise UserError(f"{flag}: {path.parent} is not a directory")
    logging.getLogger("proctor.sandbox.backends.local").setLevel(logging.ERROR)
    report = asyncio.run(
        _audit(
            backend,
            image,
            pool_size,
            limits,
            quick,
            runtime,
            only,
            docker_host,
            ray_address,
            ray_allow_unauthenticated,
        )
    )
    console = Console() if sys.stdout.isatty() else Console(width=200)
    print_table(report, console)
    if json_file is not None:
        write_json(report, json_file)
    if html_file is not None:
        write_html(report, html_file)
    if report.broken:
        raise typer.Exit(EXIT_BROKEN)


def summary_for_header(report: AuditReport) -> dict[str, Any]:
    return report.summary()
