"""`proctor sandbox audit`: probes and attacks run through ``Sandbox.exec``, one row per check.

Each family of checks lives in its own module; :func:`audit_sandbox` runs them against a sandbox
that is already open, so a run can audit the very sandbox its eval will use.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from proctor.agent.audit.battery import AuditReport, run_checks, select_checks
from proctor.agent.audit.model import AuditContext, Row
from proctor.sandbox import Limits, Sandbox

__all__ = ["AuditReport", "audit_sandbox"]


@dataclass(frozen=True)
class AuditTarget:
    """What one pass of the battery runs against: the whole sandbox, or one ray node of it."""

    sandbox: Sandbox
    # "<node ID prefix> (<hostname>)" for a ray node; None for a backend on one host.
    node: str | None = None
    # Whether its calls run on this process's kernel (a host-side check means something there).
    host_local: bool = True


def own_boot_id() -> str | None:
    """This machine's kernel boot ID (ray workers report theirs: equal means the same kernel)."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def audit_targets(sandbox: Sandbox) -> list[AuditTarget]:
    """The whole sandbox; for ray, every serving node on its own, so each node's engine and
    host are checked (calls spread by load would leave a node unchecked or mix the nodes)."""
    if sandbox.backend == "command":
        # Whatever runs behind the command is not this process's host, as far as the audit knows.
        return [AuditTarget(sandbox, host_local=False)]
    if sandbox.backend == "inspect":
        # The provider's own identity probe said whether its programs run on this kernel.
        return [AuditTarget(sandbox, host_local=bool(sandbox.describe().get("host_local")))]
    if sandbox.backend != "ray":
        return [AuditTarget(sandbox)]
    here = own_boot_id()
    targets = []
    for node in sandbox.describe().get("nodes") or []:
        node_id = str(node["node_id"])
        view: Sandbox = sandbox.on_node(node_id)  # type: ignore[attr-defined]
        boot_id = node.get("boot_id")
        targets.append(
            AuditTarget(
                view,
                node=f"{node_id[:12]} ({node.get('hostname') or 'unknown host'})",
                host_local=boot_id is not None and boot_id == here,
            )
        )
    return targets


async def audit_sandbox(
    sandbox: Sandbox,
    limits: Limits,
    *,
    quick: bool = False,
    runtime: str | None = None,
    only: Iterable[str] | None = None,
    on_row: Callable[[Row], None] | None = None,
) -> AuditReport:
    """Run the battery (or ``--quick``'s subset, or the checks named in ``only``) on ``sandbox``;
    through ray, on each of its serving nodes in turn (one row per check and node)."""
    described = sandbox.describe()
    # The runtime the sandbox reports is the truth; a caller's expectation only fills a gap.
    runtime = described.get("runtime") or runtime
    checks = select_checks(sandbox.backend, quick, only)
    targets = audit_targets(sandbox)
    kept = (
        *("backend", "image", "image_id", "user", "isolation", "call_isolation"),
        # describe()'s record of the engine path the sandbox took, and why.
        *("engine_path", "engine_path_reason"),
        *("runtime", "engine", "runtime_version"),
        *("command", "label", "program_via"),
        *("provider", "inspect_config", "output_cap", "program", "host_local", "shared_host"),
    )
    report = AuditReport(
        backend=sandbox.backend,
        runtime=runtime,
        mode="quick" if quick else ("selected" if only else "full"),
        sandbox={
            **{k: v for k, v in described.items() if k in (*kept, "ray_address")},
            **({"nodes": [t.node for t in targets]} if sandbox.backend == "ray" else {}),
        },
        limits=dict(limits.__dict__),
        started_at=dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    started = time.monotonic()
    for target in targets:
        ctx = AuditContext(
            sandbox=target.sandbox,
            limits=limits,
            backend=sandbox.backend,
            quick=quick,
            image=described.get("image_id") or described.get("image"),
            runtime=runtime,
            engine=described.get("engine"),
            node=target.node,
            host_local=target.host_local,
        )
        try:
            report.rows += await run_checks(checks, ctx, on_row)
        finally:
            for task in ctx.extra.get("shared_probes", {}).values():
                task.cancel()
    report.duration_s = time.monotonic() - started
    return report
