"""One sandbox call as the FrontierMath track makes it: timed and reported to the run's events."""

from __future__ import annotations

import time

from proctor.agent.tracks.base import RunEvents
from proctor.sandbox import ExecResult, Sandbox


async def run_in_sandbox(
    sandbox: Sandbox,
    events: RunEvents,
    code: str,
    *,
    timeout: float,
    stdin: str | None = None,
) -> ExecResult:
    """Run ``code`` in a fresh sandbox call; SandboxError (the sandbox itself failed) propagates."""
    events.sandbox_call_started()
    started = time.monotonic()
    try:
        return await sandbox.exec(code, stdin=stdin, timeout=timeout)
    finally:
        events.sandbox_call_finished(time.monotonic() - started)
