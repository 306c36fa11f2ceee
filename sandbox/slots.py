"""One bound on concurrent sandbox executions for the whole process, shared fairly.

Every backend returned by :func:`sandbox.open_sandbox` runs its calls under one process-wide
:class:`ExecutionSlots`. A call waits for a slot *before* its backend starts the clock, so its
time limit counts the program's run, never its wait. Waiting calls are served round-robin
between callers: a caller (one sample of a run, set with :func:`execution_caller`) that queued
sixty calls gets one slot, then every other waiting caller gets one, and so on, so it can
delay another caller's single call by at most one call's turn, not by all sixty.

Thread-safe and loop-agnostic: waiters may live on different event loops (each is woken on
its own loop), so several sandboxes in one process still share one bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Hashable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from proctor.sandbox.api import ExecResult, InvalidProgram, Limits, Sandbox
from proctor.sandbox.program import resolve_argv

_CALLER: ContextVar[Hashable] = ContextVar("sandbox_execution_caller", default=None)


@contextlib.contextmanager
def execution_caller(key: Hashable) -> Iterator[None]:
    """Calls made in this context (and tasks started from it) share one fair-queue turn."""
    token = _CALLER.set(key)
    try:
        yield
    finally:
        _CALLER.reset(token)


def current_caller() -> Hashable:
    """The caller set by the innermost :func:`execution_caller` (None outside any)."""
    return _CALLER.get()


@dataclass(eq=False)
class _Waiter:
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]
    granted: bool = False


class ExecutionSlots:
    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"the concurrency limit must be at least 1, got {capacity}")
        self._capacity = capacity
        self._lock = threading.Lock()
        self._in_use = 0
        # Caller -> its waiting calls; the first key is served next, then moved to the end.
        self._queues: OrderedDict[Hashable, deque[_Waiter]] = OrderedDict()

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def in_use(self) -> int:
        return self._in_use

    def resize(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"the concurrency limit must be at least 1, got {capacity}")
        with self._lock:
            self._capacity = capacity
            self._grant_locked()

    async def acquire(self, caller: Hashable = None) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._in_use < self._capacity and not self._queues:
                self._in_use += 1
                return
            waiter = _Waiter(loop, loop.create_future())
            self._queues.setdefault(caller, deque()).append(waiter)
        try:
            await waiter.future
        except BaseException:
            with self._lock:
                if waiter.granted:
                    # Granted while being cancelled: hand the slot on rather than leak it.
                    self._in_use -= 1
                    self._grant_locked()
                else:
                    queue = self._queues.get(caller)
                    if queue is not None:
                        with contextlib.suppress(ValueError):
                            queue.remove(waiter)
                        if not queue:
                            del self._queues[caller]
            raise

    def release(self) -> None:
        with self._lock:
            self._in_use -= 1
            self._grant_locked()

    @contextlib.asynccontextmanager
    async def slot(self, caller: Hashable = None) -> AsyncIterator[None]:
        await self.acquire(caller)
        try:
            yield
        finally:
            self.release()

    def _grant_locked(self) -> None:
        while self._in_use < self._capacity and self._queues:
            caller, queue = next(iter(self._queues.items()))
            waiter = queue.popleft()
            if queue:
                self._queues.move_to_end(caller)
            else:
                del self._queues[caller]
            waiter.granted = True
            self._in_use += 1
            waiter.loop.call_soon_threadsafe(_wake, waiter.future)


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


_PROCESS_SLOTS: ExecutionSlots | None = None
_PROCESS_LOCK = threading.Lock()


def process_slots(capacity: int) -> ExecutionSlots:
    """The process's one limiter, (re)sized to ``capacity``: the last sandbox opened sets it."""
    global _PROCESS_SLOTS
    with _PROCESS_LOCK:
        if _PROCESS_SLOTS is None:
            _PROCESS_SLOTS = ExecutionSlots(capacity)
        else:
            _PROCESS_SLOTS.resize(capacity)
        return _PROCESS_SLOTS


def default_concurrency(sandbox: Sandbox) -> int:
    """The CPUs the backend can use: the engine's for docker, this process's affinity otherwise."""
    available = getattr(sandbox, "available_cpus", None)
    if callable(available):
        return max(1, int(available()))
    return max(1, len(os.sched_getaffinity(0)))


def limit_sandbox(sandbox: Sandbox, max_concurrent: int | None) -> LimitedSandbox:
    """``sandbox`` under the process-wide bound: ``max_concurrent`` or the CPUs it can use."""
    capacity = max_concurrent if max_concurrent is not None else default_concurrency(sandbox)
    slots = process_slots(capacity)
    follow_slots = getattr(sandbox, "follow_slots", None)
    if callable(follow_slots):
        follow_slots(slots)  # a pool that follows demand is bounded by the same slots
    return LimitedSandbox(sandbox, slots)


class LimitedSandbox:
    """A backend whose every call first takes one of the process's execution slots."""

    def __init__(self, inner: Sandbox, slots: ExecutionSlots) -> None:
        self.inner = inner
        self.slots = slots
        self.backend = inner.backend

    async def exec(
        self,
        code: str | None = None,
        *,
        argv: Sequence[str] | None = None,
        stdin: str | bytes | None = None,
        timeout: float = 30.0,
        limits: Limits | None = None,
    ) -> ExecResult:
        # Code no interpreter can take is refused at once, not after a wait in the queue;
        # other misuse is left to the backend, which reports it its own way.
        try:
            resolve_argv(code, argv)
        except InvalidProgram:
            raise
        except ValueError:
            pass
        queued_at = time.time()
        waiting_since = time.monotonic()
        async with self.slots.slot(_CALLER.get()):
            wait_s = time.monotonic() - waiting_since
            result = await self.inner.exec(code, argv=argv, stdin=stdin, timeout=timeout, limits=limits)
        # For the audit trail: when the call asked for a slot (host wall clock) and how long it
        # waited; neither counts towards the call's time limit.
        result.extra["slot"] = {"queued_at": queued_at, "wait_s": round(wait_s, 6)}
        return result

    def describe(self) -> dict[str, Any]:
        return {**self.inner.describe(), "max_concurrent_executions": self.slots.capacity}

    async def aclose(self) -> None:
        await self.inner.aclose()

    def __getattr__(self, name: str) -> Any:
        # Backend-specific extras (pool, settle, fallback_reason...) stay reachable.
        return getattr(self.inner, name)
