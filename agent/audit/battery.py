"""Run the checks against one open sandbox: each with its own timeout, two at a time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from proctor.agent.audit import (
    controller,
    enforcement,
    isolation,
    kernel,
    limits,
    network,
    output,
    pairs,
    statelessness,
    surface,
    verdict_path,
)
from proctor.agent.audit.command_sandbox import BACKEND as COMMAND
from proctor.agent.audit.model import INSPECT, AuditContext, Check, Finding, NotRun, Row, Verdict, escape_text

ALL_CHECKS: tuple[Check, ...] = (
    *limits.CHECKS,
    *network.CHECKS,
    *isolation.CHECKS,
    *kernel.CHECKS,
    *statelessness.CHECKS,
    *pairs.CHECKS,
    *enforcement.CHECKS,
    *controller.CHECKS,
    *output.CHECKS,
    *verdict_path.CHECKS,
    *surface.CHECKS,
)
# Two checks at a time: enough to keep a warm pool busy, few enough that one check's
# CPU measurement is not starved by the others on a two-core machine.
CONCURRENCY = 2
# Run with nothing beside them: a CPU measurement, and two calls that must overlap in time.
# The pair rows too: another row's calls beside them would be noise on the counters they read.
ALONE = {"limits.cpu", "state.per_uid_quota", *pairs.PAIR_IDS}
# Why a host-side row is not applicable through --command: the audit cannot see that host.
COMMAND_HOST_SIDE = (
    "not applicable through --command: the check plants on or looks at the host behind the "
    "sandbox (files, processes, sockets, survivors), which only Proctor's own backends expose"
)


@dataclass
class AuditReport:
    backend: str
    runtime: str | None
    mode: str
    sandbox: dict[str, Any]
    limits: dict[str, Any]
    rows: list[Row] = field(default_factory=list)
    started_at: str = ""
    duration_s: float = 0.0

    def counts(self) -> dict[str, int]:
        counts = {verdict.value: 0 for verdict in Verdict}
        for row in self.rows:
            counts[row.verdict.value] += 1
        return counts

    @property
    def broken(self) -> list[Row]:
        return [row for row in self.rows if row.verdict is Verdict.BROKEN]

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "runtime": self.runtime,
            "mode": self.mode,
            "sandbox": self.sandbox,
            "limits": self.limits,
            "started_at": self.started_at,
            "duration_s": round(self.duration_s, 2),
            "counts": self.counts(),
            "passed": not self.broken,
            "rows": [row.to_dict() for row in self.rows],
        }

    def summary(self) -> dict[str, Any]:
        """What a run header keeps: counts and the rows that did not hold."""
        return {
            "mode": self.mode,
            "backend": self.backend,
            "started_at": self.started_at,
            "duration_s": round(self.duration_s, 2),
            "counts": self.counts(),
            "passed": not self.broken,
            "not_held": [
                {
                    "id": r.id,
                    **({"node": r.node} if r.node is not None else {}),
                    "verdict": r.verdict.value,
                    "observed": r.observed,
                    "evidence": r.evidence,
                }
                for r in self.rows
                if r.verdict in (Verdict.BROKEN, Verdict.WEAK)
            ],
        }


def select_checks(backend: str, quick: bool, only: Iterable[str] | None = None) -> list[Check]:
    """``only`` names check IDs or their prefixes (``net.``); otherwise all, or the quick ones."""
    wanted = set(only or ())
    chosen = []
    for check in ALL_CHECKS:
        if wanted and not any(check.id.startswith(prefix) for prefix in wanted):
            continue
        if quick and not wanted and not check.quick:
            continue
        chosen.append(check)
    return chosen


async def run_check(check: Check, ctx: AuditContext) -> Row:
    started = time.monotonic()
    if ctx.backend not in check.backends:
        why = check.not_applicable.get(ctx.backend) or f"applies to {', '.join(check.backends)} only"
        finding = Finding(Verdict.SKIPPED, why)
    elif check.host_side and ctx.backend == COMMAND:
        finding = Finding(Verdict.SKIPPED, COMMAND_HOST_SIDE)
    elif check.host_side and not ctx.host_local and ctx.backend == INSPECT:
        finding = Finding(
            Verdict.SKIPPED,
            "not applicable: the provider's programs run on another kernel than this audit (their "
            "boot ID differs), so what the check plants on or looks for here is not their host",
        )
    elif check.host_side and not ctx.host_local:
        finding = Finding(
            Verdict.SKIPPED,
            f"node {ctx.node} runs another kernel than this audit: what the check plants on or "
            "looks for in its own host is not that node's host (run the audit on that machine)",
        )
    else:
        try:
            finding = await asyncio.wait_for(check.run(ctx), timeout=check.timeout_s)
        except TimeoutError:
            finding = Finding(Verdict.BROKEN, f"the check did not finish within {check.timeout_s:g} s")
        except NotRun as exc:  # the sandbox refused a call: nothing was measured, nothing passes
            finding = Finding(Verdict.SKIPPED, f"not run: {exc}")
        except Exception as exc:  # a failing check is a finding, never a crash of the audit
            finding = Finding(Verdict.BROKEN, "the check failed", escape_text(f"{type(exc).__name__}: {exc}"))
    return Row(
        id=check.id,
        klass=check.klass,
        tried=check.tried,
        expected=check.expected,
        observed=escape_text(finding.observed, 200),
        verdict=finding.verdict,
        evidence=escape_text(finding.evidence),
        duration_s=time.monotonic() - started,
        node=ctx.node,
    )


async def run_checks(
    checks: list[Check], ctx: AuditContext, on_row: Callable[[Row], None] | None = None
) -> list[Row]:
    semaphore = asyncio.Semaphore(CONCURRENCY)
    alone = asyncio.Lock()
    rows: dict[str, Row] = {}

    async def one(check: Check) -> None:
        if check.id in ALONE:
            async with alone:
                # Take every slot, so nothing else runs beside this measurement.
                for _ in range(CONCURRENCY):
                    await semaphore.acquire()
                try:
                    row = await run_check(check, ctx)
                finally:
                    for _ in range(CONCURRENCY):
                        semaphore.release()
        else:
            async with semaphore:
                row = await run_check(check, ctx)
        rows[check.id] = row
        if on_row is not None:
            on_row(row)

    ordered = sorted(checks, key=lambda c: c.id not in ALONE)  # measure CPU first, on a quiet pool
    await asyncio.gather(*(one(check) for check in ordered))
    return [rows[check.id] for check in checks]
