"""The concurrency shared by `proctor run` and `proctor rescore`: K workers draining a queue of
samples, each finished record written at once and shielded from Ctrl-C, and SIGINT/SIGTERM
turned into a graceful stop. One place, so both keep the same guarantee: a finished sample is
never lost (docs/runs.md)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable
from typing import Any

from proctor.agent.results.records import SampleRecord
from proctor.agent.run.guard import StopReason


class ShieldedWrites:
    """Record writes in flight. A write, once started, finishes even if its worker is cancelled;
    :meth:`drain` awaits the ones a cancelled worker left, before the file is closed."""

    def __init__(self, writer: Any) -> None:
        self.writer = writer
        self.pending: set[asyncio.Future[Any]] = set()

    async def write(self, record: SampleRecord) -> SampleRecord:
        write = asyncio.ensure_future(asyncio.to_thread(self.writer.append, record))
        self.pending.add(write)
        try:
            stored: SampleRecord = await asyncio.shield(write)
        finally:
            if write.done():
                self.pending.discard(write)
        return stored

    async def drain(self) -> None:
        await asyncio.gather(*self.pending, return_exceptions=True)


async def drive_workers(
    workers: list[asyncio.Task[None]],
    writes: ShieldedWrites,
    *,
    handle_signals: bool,
    on_signal: Callable[[int], None],
) -> None:
    """Await ``workers`` (already started) with SIGINT/SIGTERM routed to ``on_signal``, then every
    write still in flight; re-raise the first worker failure other than cancellation."""
    loop = asyncio.get_running_loop()
    handled: list[int] = []
    if handle_signals:
        for signum in (int(signal.SIGINT), int(signal.SIGTERM)):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(signum, on_signal, signum)
                handled.append(signum)
    try:
        results = await asyncio.gather(*workers, return_exceptions=True)
        await writes.drain()
    finally:
        for signum in handled:
            loop.remove_signal_handler(signum)
    for outcome in results:
        if isinstance(outcome, BaseException) and not isinstance(outcome, asyncio.CancelledError):
            raise outcome


def final_status(*, interrupted: bool, failure: BaseException | None, stop: StopReason | None) -> str:
    """What run.json says about a session. A sample the harness failed on is recorded
    (harness_error); only a failure of the run itself (store, sandbox, clients) is ``failed``."""
    if interrupted:
        return "interrupted"
    if failure is not None:
        return "failed"
    if stop is not None:
        return stop.status
    return "finished"
