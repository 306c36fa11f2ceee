"""`proctor sandbox audit`: probes and attacks against this machine's sandbox, one row per check."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from proctor.agent.cli import exit_codes
from proctor.agent.cli.app import sandbox_app
from proctor.agent.errors import UserError
from proctor.sandbox import Limits, Sandbox, SandboxSpec, SandboxUnavailable, open_sandbox, option_choices
from proctor.sandbox.api import AUTO_PATH, ENGINE_PATH_CHOICES, FRESH, ISOLATIONS, RUNC_DIRECT
from proctor.sandbox.docker.runtimes import RUNTIMES

if TYPE_CHECKING:
    from proctor.agent.audit import AuditReport
    from proctor.agent.audit.compare import Comparison, Spec
    from proctor.agent.audit.model import Row
    from proctor.agent.inputs.config import SandboxConfig

# The audit machinery (the battery, the run config's models, pydantic, openai's types) is
# imported by the functions that use it: the `sandbox` group loads this module for every
# `proctor sandbox exec` and `cleanup`, and those imports were 1.2 s of their 1.5 s start.

# The registry is the one list of backends (sandbox/spec.py): a new backend is audited too.
AUDIT_BACKENDS = option_choices()["backend"]
EXIT_BROKEN = exit_codes.FAILED


def limits_from_config(path: Path) -> tuple[SandboxConfig, Limits]:
    """The sandbox section of a run config, and the limits an eval with it would get."""
    from pydantic import ValidationError

    from proctor.agent.inputs.config import SandboxConfig
    from proctor.agent.inputs.run_config_loader import format_validation_error, parse_size, read_config_file

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


def _docker_options(backend: str, isolation: str | None, engine_path: str | None) -> dict[str, str]:
    """The docker backend's isolation and engine path when they are not the defaults."""
    options: dict[str, str] = {}
    if isolation not in (None, FRESH):
        if isolation not in ISOLATIONS:
            raise UserError(f"--isolation: {isolation!r} is not one of {', '.join(ISOLATIONS)}")
        options["isolation"] = isolation
    if engine_path not in (None, AUTO_PATH):
        if engine_path not in ENGINE_PATH_CHOICES:
            raise UserError(f"--engine-path: {engine_path!r} is not one of {', '.join(ENGINE_PATH_CHOICES)}")
        # Passed even when it names the engine's path: auto, the default, might not take it.
        options["engine_path"] = engine_path
    # Only what the other backends cannot honour is refused: they take auto and docker as given.
    docker_only = [key for key, value in options.items() if key != "engine_path" or value == RUNC_DIRECT]
    if docker_only and backend not in ("auto", "docker"):
        raise UserError(f"--{docker_only[0].replace('_', '-')}: applies to the docker backend only")
    return options


async def open_audited_sandbox(
    backend: str,
    image: str | None,
    pool_size: int,
    limits: Limits,
    runtime: str | None = None,
    docker_host: str | None = None,
    ray_address: str | None = None,
    ray_allow_unauthenticated: bool = False,
    docker_options: dict[str, str] | None = None,
) -> Sandbox:
    """The sandbox under audit, opened as an eval opens it. Tests swap this for weakened ones.
    ``docker_options``: the docker backend's isolation and engine_path, when not the defaults.
    No check reads ``describe()["libraries"]``, so the local backend's import probe (galois
    compiles with numba: half a minute on a loaded machine) is skipped."""
    spec = SandboxSpec(
        backend=backend,
        image=image,
        pool_size=pool_size,
        default_limits=limits,
        probe_libraries=False,
        ray_address=ray_address,
        ray_allow_unauthenticated=ray_allow_unauthenticated,
    )
    if not ray_allow_unauthenticated:
        spec = spec.replace(
            docker_host=docker_host, **(docker_options or {}), **({"runtime": runtime} if runtime else {})
        )
    return await open_sandbox(spec)


def _progress(row: Row) -> None:
    where = f"  [{row.node}]" if row.node is not None else ""
    print(f"  {row.verdict.value:>7}  {row.id}{where}", file=sys.stderr, flush=True)


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
    docker_options: dict[str, str] | None = None,
) -> AuditReport:
    from proctor.agent.audit import audit_sandbox

    try:
        if docker_options:
            sandbox = await open_audited_sandbox(
                backend, image, pool_size, limits, runtime, docker_host, docker_options=docker_options
            )
        elif ray_allow_unauthenticated:
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
    try:
        return await audit_sandbox(sandbox, limits, quick=quick, runtime=runtime, only=only, on_row=_progress)
    finally:
        await sandbox.aclose()


async def _audit_command(argv: list[str], limits: Limits, quick: bool, only: list[str] | None) -> AuditReport:
    """A sandbox Proctor did not build, reached through the command (agent/audit/command_sandbox.py)."""
    from proctor.agent.audit import audit_sandbox
    from proctor.agent.audit.command_sandbox import CommandSandbox

    sandbox = CommandSandbox(argv, default_limits=limits)
    try:
        return await audit_sandbox(sandbox, limits, quick=quick, only=only, on_row=_progress)
    finally:
        await sandbox.aclose()


async def _compare(
    specs: list[Spec], image: str | None, pool_size: int, limits: Limits, quick: bool, only: list[str] | None
) -> Comparison:
    from proctor.agent.audit.compare import run_comparison

    async def audit_one(spec: Spec) -> AuditReport:
        print(f"-- {spec.label}", file=sys.stderr, flush=True)
        if spec.backend == "command":
            return await _audit_command(list(spec.command), limits, quick, only)
        return await _audit(spec.backend, image, pool_size, limits, quick, spec.runtime, only)

    return await run_comparison(specs, audit_one)


def _refuse_beside_command(flag: str, **given: object) -> None:
    for name, value in given.items():
        if value not in (None, False, "auto"):
            raise UserError(f"{flag}: cannot be combined with --{name.replace('_', '-')}")


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
    command: Annotated[
        str | None,
        typer.Option(
            "--command",
            help="Audit a sandbox Proctor did not build: a command that runs the Python program on its "
            "stdin, or in {file}; split like a shell would, never run by one.",
        ),
    ] = None,
    compare: Annotated[
        list[str] | None,
        typer.Option(
            "--compare",
            help="Audit several sandboxes side by side: docker, runsc, local or a command (LABEL=COMMAND), "
            "comma-separated (quote a command holding a comma); may be repeated. See docs/audit.md.",
        ),
    ] = None,
    quick: Annotated[bool, typer.Option("--quick", help="A subset that runs in under 20 s.")] = False,
    only: Annotated[
        list[str] | None, typer.Option("--only", hidden=True, help="Run only these check IDs.")
    ] = None,
    isolation: Annotated[
        str | None, typer.Option(help="docker: fresh (default) or per-sample, as sandbox.isolation.")
    ] = None,
    engine_path: Annotated[
        str | None,
        typer.Option(
            help="docker: auto (default: runc-direct where it can serve), docker or runc-direct, "
            "as sandbox.engine_path."
        ),
    ] = None,
) -> None:
    """Probe and attack the sandbox through the path evals use; exit 1 when anything is broken."""
    from proctor.agent.audit.command_sandbox import parse_command
    from proctor.agent.audit.compare import parse_specs, print_comparison
    from proctor.agent.audit.compare import write_html as write_comparison_html
    from proctor.agent.audit.compare import write_json as write_comparison_json
    from proctor.agent.audit.render import print_table, write_html, write_json

    if backend not in AUDIT_BACKENDS:
        raise UserError(f"--backend: {backend!r} is not one of {', '.join(AUDIT_BACKENDS)}")
    # The user's own flags (before --limits-from fills any in): a command or a comparison
    # chooses its sandboxes itself.
    if command is not None and compare:
        raise UserError("--command: cannot be combined with --compare (name the command in the list)")
    if compare:
        _refuse_beside_command(
            "--compare", backend=backend, runtime=runtime, docker_host=docker_host, ray_address=ray_address
        )
    if command is not None:
        _refuse_beside_command(
            "--command",
            backend=backend,
            runtime=runtime,
            docker_host=docker_host,
            ray_address=ray_address,
            image=image,
            ray_allow_unauthenticated=ray_allow_unauthenticated,
        )
    pool_size = 2
    limits = Limits()
    if limits_from is not None:
        config, limits = limits_from_config(limits_from)
        image = image or config.image
        pool_size = config.pool_size or 2
        if config.runtime != "runc" and runtime is None:
            runtime = config.runtime
        docker_host = docker_host or config.docker_host
        isolation = isolation or config.isolation
        engine_path = engine_path or config.engine_path
        if backend == "ray":
            ray_address = ray_address or config.ray_address
            ray_allow_unauthenticated = ray_allow_unauthenticated or config.ray_allow_unauthenticated
    check_runtime(runtime, backend, docker_host, ray_address)
    docker_options = _docker_options(backend, isolation, engine_path)
    for flag, path in (("--json", json_file), ("--html", html_file)):
        if path is not None and not path.parent.is_dir():
            raise UserError(f"{flag}: {path.parent} is not a directory")
    logging.getLogger("proctor.sandbox.local.opener").setLevel(logging.ERROR)
    console = Console() if sys.stdout.isatty() else Console(width=200)
    if compare:
        specs = parse_specs(compare)
        comparison = asyncio.run(_compare(specs, image, pool_size, limits, quick, only))
        print_comparison(comparison, console)
        if json_file is not None:
            write_comparison_json(comparison, json_file)
        if html_file is not None:
            write_comparison_html(comparison, html_file)
        # A comparison reports other people's sandboxes: finishing is success, whatever it found.
        return
    if command is not None:
        report = asyncio.run(_audit_command(parse_command(command), limits, quick, only))
    else:
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
                docker_options,
            )
        )
    print_table(report, console)
    if json_file is not None:
        write_json(report, json_file)
    if html_file is not None:
        write_html(report, html_file)
    if report.broken:
        raise typer.Exit(EXIT_BROKEN)


def summary_for_header(report: AuditReport) -> dict[str, Any]:
    return report.summary()
