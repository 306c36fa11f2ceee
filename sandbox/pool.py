"""A warm pool of started containers, each handed out exactly once and refilled in the background.

The pool knows nothing about Docker: it is given a coroutine that makes one ready container
and one that destroys it. A container leaves the pool for exactly one call; the caller
destroys it afterwards, so no state can pass from one call to the next.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

_RETRY_AFTER_FAILURE_S = 1.0


class WarmPool:
    def __init__(
        self,
        create: Callable[[], Awaitable[str]],
        destroy: Callable[[str], Awaitable[None]],
        size: int,
    ) -> None:
        if size < 0:
            raise ValueError(f"pool size must be >= 0, got {size}")
        self.size = size
        self._create = create
        self._destroy = destroy
        self._ready: deque[str] = deque()
        self._wake = asyncio.Event()
        self._filled = asyncio.Event()
        self._refill_task: asyncio.Task[None] | None = None
        self._closed = False
        self.last_error: BaseException | None = None

    def start(self) -> None:
        if self.size > 0 and self._refill_task is None:
            self._refill_task = asyncio.create_task(self._refill_forever(), name="sandbox-pool-refill")

    def take(self) -> str | None:
        """A started container for one call, or None when none is ready (never waits)."""
        self._wake.set()
        if not self._ready:
            return None
        self._filled.clear()
        return self._ready.popleft()

    @property
    def ready_count(self) -> int:
        return len(self._ready)

    async def wait_full(self, timeout: float = 60.0) -> bool:
        """Wait until every slot holds a started container (used by benchmarks and tests)."""
        if self.size == 0:
            return True
        self._wake.set()
        try:
            await asyncio.wait_for(self._filled.wait(), timeout)
        except TimeoutError:
            return False
        return True

    async def close(self) -> None:
        """Stop refilling and destroy every container still waiting in the pool."""
        self._closed = True
        if self._refill_task is not None:
            self._refill_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._refill_task
        leftovers = list(self._ready)
        self._ready.clear()
        await asyncio.gather(*(self._destroy(cid) for cid in leftovers), return_exceptions=True)

    async def _refill_forever(self) -> None:
        while not self._closed:
            if len(self._ready) >= self.size:
                self._filled.set()
                self._wake.clear()
                await self._wake.wait()
                continue
            try:
                container_id = await self._create()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # keep serving: calls fall back to on-demand containers
                self.last_error = exc
                log.warning("sandbox pool: could not start a warm container: %s", exc)
                await asyncio.sleep(_RETRY_AFTER_FAILURE_S)
                continue
            if self._closed:
                await self._destroy(container_id)
                return
            self._ready.append(container_id)
