"""Probes whose one run answers several rows: run once per audit, shared by those rows."""

from __future__ import annotations

import asyncio
from typing import Any

from proctor.agent.audit.model import AuditContext, run_probe
from proctor.sandbox import ExecResult

Reply = tuple[ExecResult, dict[str, Any] | None]


async def shared_probe(ctx: AuditContext, key: str, body: str, *, timeout: float = 10.0) -> Reply:
    """Run ``body`` once for this audit however many rows ask for it."""
    tasks: dict[str, asyncio.Task[Reply]] = ctx.extra.setdefault("shared_probes", {})
    task = tasks.get(key)
    if task is None:
        task = asyncio.ensure_future(run_probe(ctx, body, timeout=timeout))
        tasks[key] = task
    return await asyncio.shield(task)
