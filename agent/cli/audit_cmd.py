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
from proctor.agent.cli.sandbox_flags import given_sandbox_flags, refuse_sandbox_flags, spec_with_flags
from proctor.agent.errors import UserError
from proctor.sandbox import Limits, Sandbox, SandboxSpec, SandboxUnavailable, open_sandbox, option_choices
from proctor.sandbox.api import RUNC

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
    from proctor.agent.run.config_loader import format_validation_error, parse_size, read_config_file

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


async def open_audited_sandbox(spec: SandboxSpec) -> Sandbox:
    """The sandbox under audit, opened from the spec as an eval opens it. Tests swap this for
    weakened ones."""
    return await open_sandbox(spec)


def _progress(row: Row) -> None:
    where = f"  [{row.node}]" if row.node is not None else ""
    print(f"  {row.verdict.value:>7}  {row.id}{where}", file=sys.stderr, flush=True)


async def _audit(spec: SandboxSpec, quick: bool, only: list[str] | None) -> AuditReport:
    from proctor.agent.audit import audit_sandbox

    try:
        sandbox = await open_audited_sandbox(spec)
    except SandboxUnavailable as exc:
        chosen = f"--runtime {spec.runtime}" if spec.runtime != RUNC else f"--backend {spec.backend}"
        raise UserError(f"{chosen}: {exc}") from None
    limits = spec.default_limits or Limits()
    try:
        return await audit_sandbox(
            sandbox, limits, quick=quick, runtime=spec.runtime, only=only, on_row=_progress
        )
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


async def _audit_inspect(
    provider: str, config: str | None, limits: Limits, quick: bool, only: list[str] | None
) -> AuditReport:
    """An Inspect AI provider, driven through its sample lifecycle (agent/audit/inspect_sandbox.py).
    Its output rows are graded against the cap Inspect documents for exec, not Proctor's."""
    from proctor.agent.audit import audit_sandbox
    from proctor.agent.audit.inspect_sandbox import InspectSandbox

    sandbox = await InspectSandbox.open(provider, config)
    try:
        graded = limits.replace(output_bytes=sandbox.output_cap)
        return await audit_sandbox(sandbox, graded, quick=quick, only=only, on_row=_progress)
    finally:
        await sandbox.aclose()


async def _compare(specs: list[Spec], base: SandboxSpec, quick: bool, only: list[str] | None) -> Comparison:
    """Each column's sandbox: a Proctor backend is ``base`` (the image, pool and limits every
    column shares) opened on that column's backend and runtime."""
    from proctor.agent.audit.compare import run_comparison

    limits = base.default_limits or Limits()

    async def audit_one(column: Spec) -> AuditReport:
        print(f"-- {column.label}", file=sys.stderr, flush=True)
        if column.backend == "command":
            return await _audit_command(list(column.command), limits, quick, only)
        if column.provider is not None:
            return await _audit_inspect(column.provider, column.config, limits, quick, only)
        return await _audit(base.replace(backend=column.backend, runtime=column.runtime or RUNC), quick, only)

    return await run_comparison(specs, audit_one)


def _find_inspect_providers(specs: list[Spec]) -> None:
    """Every Inspect provider a comparison names exists, and its config file too, before any audit."""
    from proctor.agent.audit.inspect_sandbox import find_provider, resolve_config

    for spec in specs:
        if spec.provider is not None:
            find_provider(spec.provider)
            resolve_config(spec.config)


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
            help="Audit several sandboxes side by side: docker, runsc, local, an Inspect provider "
            "(inspect:NAME[:CONFIG]) or a command (LABEL=COMMAND), comma-separated (quote a command "
            "holding a comma); may be repeated. See docs/audit.md.",
        ),
    ] = None,
    inspect: Annotated[
        str | None,
        typer.Option(
            "--inspect",
            help="Audit an installed Inspect AI sandbox provider (local, docker, proctor, ...) through its "
            "exec, in one sample environment. See docs/audit.md.",
        ),
    ] = None,
    inspect_config: Annotated[
        str | None,
        typer.Option("--inspect-config", help="The Inspect provider's config file (default: none)."),
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

    # The flags that open a sandbox are named after the spec's options: gathered here in one
    # mapping, laid over one spec below.
    given = given_sandbox_flags(locals())
    # The user's own flags (before --limits-from fills any in): a command or a comparison
    # chooses its sandboxes itself.
    if command is not None and compare:
        raise UserError("--command: cannot be combined with --compare (name the command in the list)")
    if inspect is not None and (command is not None or compare):
        raise UserError(
            "--inspect: cannot be combined with --command or --compare (name inspect:NAME in the list)"
        )
    if inspect_config is not None and inspect is None:
        raise UserError("--inspect-config: applies to --inspect only (in --compare: inspect:NAME:CONFIG)")
    if inspect is not None:
        refuse_sandbox_flags("--inspect", given)
    if compare:
        # The columns share the image (and --limits-from's limits); each names its own backend.
        refuse_sandbox_flags("--compare", given, allowed=frozenset({"image"}))
    if command is not None:
        refuse_sandbox_flags("--command", given)
    # No check reads describe()["libraries"], so the local backend's import probe (galois
    # compiles with numba: half a minute on a loaded machine) is skipped.
    base = SandboxSpec(probe_libraries=False)
    if limits_from is not None:
        config, limits = limits_from_config(limits_from)
        # The config's sandbox as an eval with it opens one; a pool of none still audits with two.
        base = config.spec.replace(probe_libraries=False, pool_size=config.spec.pool_size or base.pool_size)
    else:
        limits = Limits()
    spec = spec_with_flags(base.replace(default_limits=limits), given)
    for flag, path in (("--json", json_file), ("--html", html_file)):
        if path is not None and not path.parent.is_dir():
            raise UserError(f"{flag}: {path.parent} is not a directory")
    logging.getLogger("proctor.sandbox.local.opener").setLevel(logging.ERROR)
    console = Console() if sys.stdout.isatty() else Console(width=200)
    if compare:
        specs = parse_specs(compare)
        _find_inspect_providers(specs)
        comparison = asyncio.run(_compare(specs, spec, quick, only))
        print_comparison(comparison, console)
        if json_file is not None:
            write_comparison_json(comparison, json_file)
        if html_file is not None:
            write_comparison_html(comparison, html_file)
        # A comparison reports other people's sandboxes: finishing is success, whatever it found.
        return
    if inspect is not None:
        from proctor.agent.audit.inspect_sandbox import find_provider

        find_provider(inspect)
        report = asyncio.run(_audit_inspect(inspect, inspect_config, limits, quick, only))
    elif command is not None:
        report = asyncio.run(_audit_command(parse_command(command), limits, quick, only))
    else:
        report = asyncio.run(_audit(spec, quick, only))
    print_table(report, console)
    if json_file is not None:
        write_json(report, json_file)
    if html_file is not None:
        write_html(report, html_file)
    if report.broken:
        raise typer.Exit(EXIT_BROKEN)


def summary_for_header(report: AuditReport) -> dict[str, Any]:
    return report.summary()
