"""The run's sandbox, before any sample runs: opened as the config's ``sandbox`` section says,
its memory checked against the host, audited (``proctor run --audit``) and calibrated, and
each of these recorded in run.json (and in the session that opened it)."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Any

from rich.console import Console

from proctor.agent.errors import UserError
from proctor.agent.inputs.config import RunConfig
from proctor.agent.inputs.run_config_loader import parse_size
from proctor.agent.run.hardware import calibrate, hardware_record, host_memory_bytes, memory_check
from proctor.sandbox import Limits, Sandbox, open_sandbox

# open_sandbox's signature: (backend, *, image, pool_size, default_limits) -> Sandbox.
SandboxOpener = Callable[..., Awaitable[Sandbox]]


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
    box = config.sandbox
    try:
        memory = parse_size(box.memory)
    except ValueError as exc:
        raise UserError(f"field 'sandbox.memory': {exc}") from None
    # Passed only when set: injected openers (benchmarks) need not know the option.
    bound: dict[str, Any] = (
        {"max_concurrent_executions": box.max_concurrent_executions}
        if box.max_concurrent_executions is not None
        else {}
    )
    if box.ray_address is not None:
        bound["ray_address"] = box.ray_address
    if box.ray_allow_unauthenticated:
        bound["ray_allow_unauthenticated"] = True
    # Likewise the runtime and engine, which only the docker backend has.
    if box.runtime != "runc" or box.docker_host is not None:
        bound.update(runtime=box.runtime, docker_host=box.docker_host)
    if box.isolation != "fresh":
        bound.update(isolation=box.isolation)
    if box.engine_path != "auto":
        bound.update(engine_path=box.engine_path)
    sandbox = await (opener or open_sandbox)(
        box.backend,
        image=box.image,
        pool_size=box.pool_size,
        default_limits=Limits(memory_bytes=memory, cpus=box.cpus),
        **bound,
    )
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
        # engine_path auto may choose differently on the machine a run resumes on.
        **({"sandbox_engine_path": described["engine_path"]} if "engine_path" in described else {}),
    )
    check_memory(config, described, memory, header)
    if audit:
        await audit_run_sandbox(config, sandbox, header, audit=audit, console=console)
    limits = Limits(memory_bytes=memory, cpus=box.cpus)
    try:
        calibration = await calibrate(sandbox, limits) if box.calibrate else None
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
        backend=str(described.get("backend") or config.sandbox.backend),
    )
    header["sandbox_memory_check"] = check
    header["sessions"][-1]["sandbox_memory_check"] = check
    if check.get("warning"):
        print(f"proctor: warning: {check['warning']}", file=sys.stderr, flush=True)


def run_limits(config: RunConfig) -> Limits:
    box = config.sandbox
    return Limits(memory_bytes=parse_size(box.memory), cpus=box.cpus)


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
