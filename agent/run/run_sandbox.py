"""The run's sandbox, before any sample runs: opened as the config's ``sandbox`` section says,
its memory checked against the host, audited (``proctor run --audit``) and calibrated, and
each of these recorded in run.json (and in the session that opened it)."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Any

from rich.console import Console

from proctor.agent.errors import UserError
from proctor.agent.inputs.config import RunConfig, SandboxConfig
from proctor.agent.run.config_loader import parse_size
from proctor.agent.run.hardware import calibrate, hardware_record, host_memory_bytes, memory_check
from proctor.sandbox import Limits, Sandbox, SandboxSpec, open_sandbox

# open_sandbox given a spec; a benchmark may inject an in-process double that takes the same.
SandboxOpener = Callable[[SandboxSpec], Awaitable[Sandbox]]


async def open_run_sandbox(
    config: RunConfig,
    header: dict[str, Any],
    *,
    needed: bool,
    opener: SandboxOpener | None,
    audit: str | None,
    console: Console,
) -> Sandbox | None:
    """The sandbox this session's samples run in, or None when none of them runs code.

    ``opener`` is :func:`proctor.sandbox.open_sandbox` unless a benchmark injects an in-process
    double; ``audit`` is ``"quick"`` or ``"full"`` to audit the opened sandbox first."""
    if not needed:
        header.setdefault("sandbox", None)
        # No code runs in a sandbox this session: the host is still worth recording.
        if not header.get("hardware"):
            header["hardware"] = hardware_record(None, run_limits(config), None)
        return None
    spec = sandbox_spec(config.sandbox)
    memory = run_limits(config).memory_bytes
    # The one value every layer opens from; recorded so a rescore reopens the same sandbox.
    header["sandbox_spec"] = spec.record()
    header["sessions"][-1]["sandbox_spec"] = header["sandbox_spec"]
    sandbox = await (opener or open_sandbox)(spec)
    described = sandbox.describe()
    isolates_less = bool(described.get("isolates_less", sandbox.backend != "docker"))
    header.update(sandbox=described, sandbox_isolates_less=isolates_less)
    warning = described.get("warning")
    if warning:
        # Said before any sample runs, and kept in run.json (sandbox.warning) and the summary.
        print(f"proctor: {warning}", file=sys.stderr, flush=True)
    # Each session records its own sandbox: a resumed run may have moved backend.
    header["sessions"][-1].update(
        sandbox_backend=sandbox.backend,
        sandbox_image_id=described.get("image_id"),
        # describe()'s record of the engine path taken: the spec's auto may choose differently
        # on the machine a run resumes on.
        **({"sandbox_engine_path": described["engine_path"]} if "engine_path" in described else {}),
    )
    check_memory(config, described, memory, header)
    if audit:
        await audit_run_sandbox(config, sandbox, header, audit=audit, console=console)
    limits = run_limits(config)
    try:
        calibration = await calibrate(sandbox, limits) if config.sandbox.calibrate else None
    except BaseException:
        await sandbox.aclose()
        raise
    header["hardware"] = hardware_record(described, limits, calibration)
    header["sessions"][-1]["calibration"] = calibration
    return sandbox


def check_memory(config: RunConfig, described: dict[str, Any], memory: int, header: dict[str, Any]) -> None:
    """Record whether every call that may run at once can have its memory; warn if not."""
    slots = described.get("max_concurrent_executions")
    check = memory_check(
        memory_bytes=memory,
        samples_in_flight=config.max_concurrency,
        execution_slots=slots if isinstance(slots, int) and not isinstance(slots, bool) else None,
        host_bytes=host_memory_bytes(),
        backend=str(described.get("backend") or config.sandbox.spec.backend),
    )
    header["sandbox_memory_check"] = check
    header["sessions"][-1]["sandbox_memory_check"] = check
    if check.get("warning"):
        print(f"proctor: warning: {check['warning']}", file=sys.stderr, flush=True)


def run_limits(config: RunConfig) -> Limits:
    return sandbox_limits(config.sandbox)


def sandbox_limits(box: SandboxConfig) -> Limits:
    """A call's limits as the config's ``sandbox`` section sets them; a bad size names the field."""
    try:
        return Limits(memory_bytes=parse_size(box.memory), cpus=box.cpus)
    except ValueError as exc:
        raise UserError(f"field 'sandbox.memory': {exc}") from None


def sandbox_spec(box: SandboxConfig) -> SandboxSpec:
    """The one value run and rescore open their sandbox from, built once from the config's
    ``sandbox`` section (flags already laid over it). The section's options are the spec's own
    fields (agent/inputs/config.py derives them), so none is retyped on the way or dropped
    (tests/runner/test_sandbox_spec_from_config.py); the call limits come from memory and cpus."""
    return box.spec.replace(default_limits=sandbox_limits(box))


async def audit_run_sandbox(
    config: RunConfig, sandbox: Sandbox, header: dict[str, Any], *, audit: str, console: Console
) -> None:
    """Audit the very sandbox this run will use; refuse to start when anything is broken."""
    from proctor.agent.audit import audit_sandbox
    from proctor.agent.audit.render import headline

    limits = run_limits(config)
    try:
        report = await audit_sandbox(sandbox, limits, quick=audit == "quick")
    except BaseException:
        await sandbox.aclose()
        raise
    header["audit"] = report.summary()
    header["sessions"][-1]["audit"] = header["audit"]
    console.print(headline(report), markup=False, highlight=False, soft_wrap=True)
    if report.broken:
        await sandbox.aclose()
        # Through ray a check runs on every node: say on which one it failed.
        names = ", ".join(
            f"{row.id}{f' on node {row.node}' if row.node else ''} ({row.observed})" for row in report.broken
        )
        failed = len(report.broken)
        raise UserError(f"--audit {audit}: the sandbox failed {failed} check(s), not starting: {names}")
