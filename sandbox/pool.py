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
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

# A failing engine is retried with doubling waits, so a broken image or engine costs a
# few log lines and little CPU instead of a tight loop; calls still get on-demand containers.
_FIRST_RETRY_S = 1.0
_MAX_RETRY_S = 30.0
REFILL_DELAY_S = 0.25


Item = TypeVar("Item")


class WarmPool(Generic[Item]):
    def __init__(
        self,
        create: Callable[[], Awaitable[Item]],
        destroy: Callable[[Item], Awaitable[None]],
        size: int,
        *,
        first_retry_s: float = _FIRST_RETRY_S,
        max_retry_s: float = _MAX_RETRY_S,
    ) -> None:
        if size < 0:
            raise ValueError(f"pool size must be >= 0, got {size}")
        self.size = size
        self._create = create
        self._destroy = destroy
        self._ready: deque[Item] = deque()
        self._wake = asyncio.Event()
        self._filled = asyncio.Event()
        self._refill_task: asyncio.Task[None] | None = None
        self._closed = False
        self.last_error: BaseException | None = None
        self._first_retry_s = first_retry_s
        self._max_retry_s = max_retry_s

    def start(self) -> None:
        if self.size > 0 and self._refill_task is None:
            self._refill_task = asyncio.create_task(self._refill_forever(), name="sandbox-pool-refill")

    def take(self) -> Item | None:
        """A started container for one call, or None when none is ready (never waits).

        Call :meth:`release` when the call is over: that starts the refill.
        """
        if not self._ready:
            self._wake.set()
            return None
        self._filled.clear()
        # Starting a container costs the engine ~0.1-0.3 s of CPU; on two cores doing that
        # during a short call slows the call itself, so the refill waits for the call to end,
        # or for a short delay, so that a long call does not leave the pool short.
        asyncio.get_running_loop().call_later(REFILL_DELAY_S, self._wake.set)
        return self._ready.popleft()

    def release(self) -> None:
        """The call that took a container is over: refill now."""
        self._wake.set()

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
        await asyncio.gather(*(self._destroy(item) for item in leftovers), return_exceptions=True)

    async def _refill_forever(self) -> None:
        retry_s = self._first_retry_s
        while not self._closed:
            if len(self._ready) >= self.size:
                self._filled.set()
                self._wake.clear()
                await self._wake.wait()
                continue
            try:
                item = await self._create()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # keep serving: calls fall back to on-demand containers
                self.last_error = exc
                log.warning(
                    "sandbox pool: could not start a warm container (retrying in %.0f s): %s", retry_s, exc
                )
                await asyncio.sleep(retry_s)
                retry_s = min(retry_s * 2, self._max_retry_s)
                continue
            retry_s = self._first_retry_s
            if self._closed:
                await self._destroy(item)
                return
            self._ready.append(item)
