"""`proctor sandbox audit`: probes and attacks run through ``Sandbox.exec``, one row per check.

Each family of checks lives in its own module; :func:`audit_sandbox` runs them against a sandbox
that is already open, so a run can audit the very sandbox its eval will use.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterable

from proctor.agent.audit.battery import AuditReport, run_checks, select_checks
from proctor.agent.audit.model import AuditContext, Row
from proctor.sandbox import Limits, Sandbox

__all__ = ["AuditReport", "audit_sandbox"]


async def audit_sandbox(
    sandbox: Sandbox,
    limits: Limits,
    *,
    quick: bool = False,
    runtime: str | None = None,
    only: Iterable[str] | None = None,
    on_row: Callable[[Row], None] | None = None,
) -> AuditReport:
    """Run the battery (or ``--quick``'s subset, or the checks named in ``only``) on ``sandbox``."""
    described = sandbox.describe()
    # The runtime the sandbox reports is the truth; a caller's expectation only fills a gap.
    runtime = described.get("runtime") or runtime
    ctx = AuditContext(
        sandbox=sandbox,
        limits=limits,
        backend=sandbox.backend,
        quick=quick,
        image=described.get("image_id") or described.get("image"),
        runtime=runtime,
        engine=described.get("engine"),
    )
    checks = select_checks(sandbox.backend, quick, only)
    report = AuditReport(
        backend=sandbox.backend,
        runtime=runtime,
        mode="quick" if quick else ("selected" if only else "full"),
        sandbox={
            k: v
            for k, v in described.items()
            if k
            in ("backend", "image", "image_id", "user", "isolation", "runtime", "engine", "runtime_version")
        },
        limits=dict(limits.__dict__),
        started_at=dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    started = time.monotonic()
    try:
        report.rows = await run_checks(checks, ctx, on_row)
    finally:
        for task in ctx.extra.get("shared_probes", {}).values():
            task.cancel()
    report.duration_s = time.monotonic() - started
    return report
