"""One session of `proctor run` or `proctor rescore`, from the store's claim to the summary.

Both commands plan a list of samples, skip the ones an earlier session finished, and drain the
rest with K workers. Everything between is this one lifecycle, so run and rescore keep the same
guarantees (docs/runs.md): the store is claimed and run.json written only once what the samples
need is open; each finished record is on disk before its worker takes the next sample; Ctrl-C
or SIGTERM cancels only the samples in flight; and whatever ends the session (finished,
interrupted, failed, an endpoint that refused for good) is recorded with the same fields, in
run.json's session and header, followed by a summary of every finished record.

A command supplies only what differs: what it opens, how one sample becomes a record, what its
progress display shows first, and what it adds to the header and the summary.
"""

from __future__ import annotations

import asyncio
import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from proctor.agent.results.records import SampleRecord, utc_now
from proctor.agent.results.store import RunStore, SampleKey, sample_key
from proctor.agent.run.failure_records import describe_exception
from proctor.agent.run.guard import RunGuard, StopReason
from proctor.agent.run.progress import RunProgress
from proctor.agent.run.sample_workers import ShieldedWrites, drive_workers, final_status
from proctor.agent.text.terminal import one_line

# How many harness errors a session lists in run.json; the samples themselves keep them all.
LISTED_HARNESS_ERRORS = 50


class PlannedItem(Protocol):
    """A planned sample of either command: what identifies its record in the store."""

    @property
    def key(self) -> SampleKey: ...


ItemT = TypeVar("ItemT", bound=PlannedItem)


@dataclass
class SessionPlan(Generic[ItemT]):
    """What one session does, read from the store once: every planned sample, those an earlier
    session finished (kept, never run again), and those left to run now."""

    planned: list[ItemT]
    pending: list[ItemT]
    already: list[SampleRecord]
    # This session's entry in run.json's ``sessions``; a command may add its own fields.
    record: dict[str, Any] = field(default_factory=dict)

    @property
    def planned_keys(self) -> set[SampleKey]:
        return {item.key for item in self.planned}


def plan_session(
    store: RunStore,
    planned: Sequence[ItemT],
    *,
    finished: Callable[[SampleRecord], bool],
    resume: bool,
) -> SessionPlan[ItemT]:
    """Split ``planned`` by what the store already holds; ``finished`` says which stored records
    count as done (an error outcome is not a result: a resume runs that sample again)."""
    loaded = store.load(repair=True)
    done = {sample_key(record) for record in loaded.records if finished(record)}
    keys = {item.key for item in planned}
    pending = [item for item in planned if item.key not in done]
    already = [r for r in loaded.records if sample_key(r) in keys and sample_key(r) in done]
    record: dict[str, Any] = {
        "started_at": utc_now(),
        "ended_at": None,
        "status": "running",
        "resumed": bool(resume and loaded.records),
        "planned_samples": len(planned),
        "already_done": len(already),
        "torn_bytes_removed": loaded.torn_bytes,
    }
    return SessionPlan(list(planned), pending, already, record)


@dataclass
class SessionEnd:
    """How a session ended, as run.json and summary.json now say."""

    # finished | interrupted | failed | stopped: auth | stopped: quota
    status: str
    summary: dict[str, Any]
    # Records of the plan on disk (this session's and earlier ones').
    finished: int
    # Records this session wrote.
    ran: int
    stop: StopReason | None


class SampleSession(ABC, Generic[ItemT]):
    """The lifecycle both commands share; a subclass says what differs (the abstract methods)."""

    def __init__(self, progress: RunProgress, *, max_concurrency: int, handle_signals: bool) -> None:
        self.progress = progress
        # Retries are counted per sample; an endpoint that refuses the key or is out of quota
        # stops the session: no further sample starts.
        self.guard = RunGuard(on_any_retry=progress.model_retry)
        self.max_concurrency = max_concurrency
        # SIGINT/SIGTERM stop the session gracefully; off where it is not in the main thread.
        self.handle_signals = handle_signals
        self.interrupted = False
        self.harness_errors: list[str] = []
        self._workers: list[asyncio.Task[None]] = []
        self._stop_announced = False

    # -- what a command supplies ----------------------------------------------------------
    @abstractmethod
    async def open_resources(
        self, stack: contextlib.AsyncExitStack, header: dict[str, Any], pending: list[ItemT]
    ) -> None:
        """Open what the pending samples need (sandbox, model clients) on ``stack``. It runs
        before the store is claimed: a bad key or a missing image leaves no run behind."""

    @abstractmethod
    def begin_progress(self, header: dict[str, Any], plan: SessionPlan[ItemT]) -> None:
        """Start the progress display (the store is claimed, the header written)."""

    @abstractmethod
    async def finish_sample(self, item: ItemT) -> SampleRecord:
        """One planned sample to its record; whatever the sample raises becomes a recorded
        outcome (only cancellation and the store's own failures end the session)."""

    @abstractmethod
    def summarize(self, records: list[SampleRecord], header: dict[str, Any], planned: int) -> dict[str, Any]:
        """summary.json of the plan's finished records."""

    async def keep(self, writes: ShieldedWrites, item: ItemT, record: SampleRecord) -> SampleRecord:
        """Store one finished record (fsync'd before the worker takes the next sample)."""
        return await writes.write(record)

    def close_header(self, header: dict[str, Any], records: list[SampleRecord]) -> None:
        """Add a command's own closing fields to run.json (``header["sessions"][-1]`` is this
        session's entry), from the plan's records on disk."""

    # -- the lifecycle -------------------------------------------------------------------------
    async def run_session(
        self, store: RunStore, header: dict[str, Any], plan: SessionPlan[ItemT]
    ) -> SessionEnd:
        """Run ``plan``'s pending samples into ``store`` (locked by the caller); end with the
        session's status in run.json and a summary, whatever stopped it."""
        session = plan.record
        header["sessions"].append(session)
        header.update(
            status="running",
            started_at=session["started_at"],
            ended_at=None,
            samples_planned=len(plan.planned),
        )
        ran = 0
        header_written = False
        failure: BaseException | None = None
        try:
            async with contextlib.AsyncExitStack() as stack:
                await self.open_resources(stack, header, plan.pending)
                store.claim()
                store.write_header(header)
                header_written = True
                writes = ShieldedWrites(store.open_writer())
                stack.callback(store.close)
                self.begin_progress(header, plan)
                stack.callback(self.progress.end)
                ran = await self._run_pending(plan.pending, writes)
        except BaseException as exc:  # finished samples still get their header and summary
            if not header_written:
                raise
            failure = exc
            if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt):
                self.interrupted = True

        stop = self.guard.stop
        status = final_status(interrupted=self.interrupted, failure=failure, stop=stop)
        planned_keys = plan.planned_keys
        records = [r for r in store.load(repair=False).records if sample_key(r) in planned_keys]
        session.update(
            ended_at=utc_now(),
            status=status,
            ran=ran,
            harness_errors=self.harness_errors[:LISTED_HARNESS_ERRORS],
        )
        if failure is not None and not self.interrupted:
            session["error"] = describe_exception(failure)
        if stop is not None:
            session["stopped"] = stop.as_json()
        header.update(status=status, ended_at=session["ended_at"], stopped=session.get("stopped"))
        self.close_header(header, records)
        store.write_header(header)
        summary = self.summarize(records, header, len(plan.planned))
        store.write_summary(summary)
        # Cancellation ends here, as an interrupted session; a KeyboardInterrupt that got past
        # the signal handler (a second Ctrl-C) and any failure go on up once all is written.
        if failure is not None and not isinstance(failure, asyncio.CancelledError):
            raise failure
        return SessionEnd(status, summary, len(records), ran, stop)

    async def _run_pending(self, pending: list[ItemT], writes: ShieldedWrites) -> int:
        queue: Iterator[ItemT] = iter(pending)
        ran = 0

        async def worker() -> None:
            nonlocal ran
            # A refusal (credentials, quota) stops the session: no further sample starts; the
            # ones in flight finish or end as errors and are kept.
            while not self._stopping():
                item = next(queue, None)
                if item is None:
                    return
                self.progress.sample_started()
                record = await self.finish_sample(item)
                stored = await self.keep(writes, item, record)
                ran += 1
                self.progress.sample_finished(stored)

        self._workers = [
            asyncio.create_task(worker()) for _ in range(min(self.max_concurrency, max(len(pending), 1)))
        ]
        await drive_workers(
            self._workers, writes, handle_signals=self.handle_signals, on_signal=self._interrupt
        )
        return ran

    def _stopping(self) -> bool:
        stop = self.guard.stop
        if stop is None:
            return False
        if not self._stop_announced:
            self._stop_announced = True
            self.progress.console.print(
                # The endpoint's own message: one line, never a terminal control.
                f"proctor: {stop.status}: {one_line(stop.describe())}; no further samples start",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        return True

    def _interrupt(self, signum: int) -> None:
        """First Ctrl-C: stop cleanly (cancel in-flight samples, keep finished ones)."""
        self.interrupted = True
        # A second Ctrl-C falls through to Python's default handler and aborts at once.
        asyncio.get_running_loop().remove_signal_handler(signum)
        for task in self._workers:
            task.cancel()
