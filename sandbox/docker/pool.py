"""A warm pool that follows demand: started containers, recycled between calls once proven clean.

The pool knows nothing about Docker: it is given coroutines that make one ready container,
destroy one, and reset one that a call has used (the reset proves the container clean or fails,
see docs/sandbox.md "Recycled containers"). A container serves one call at a time.

Its size follows demand. A call takes an idle container it may use: one never used, or one
its own caller (one sample of a run, see :func:`proctor.sandbox.slots.execution_caller`) used
before. A container that served one caller never serves another, so what a reset cannot clear
(counters such as the next process ID, see docs/sandbox.md) never links two samples. When none
is idle, a new one is created while the pool is under its bound; at the bound an idle container
of another caller is removed to make room, and otherwise the call waits for the next container
to come back (back-pressure) instead of creating more. The bound is the process's execution
slots (calls that can run at once) plus the spare ``size``, plus, with recycling, room for
``keep_owned`` callers' own idle containers. After a call the container is reset off the
caller's path and becomes idle again, for its caller only. The spare counts never-used
containers only and is kept started ahead of demand in the background; unused containers idle
longer than ``idle_s`` beyond it, and a caller's own idle longer than ``owned_idle_s``, are
removed, so the pool shrinks when demand falls.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

# A failing engine is retried with doubling waits, so a broken image or engine costs a
# few log lines and little CPU instead of a tight loop; calls still get on-demand containers.
_FIRST_RETRY_S = 1.0
_MAX_RETRY_S = 30.0
REFILL_DELAY_S = 0.25
# A container serves at most this many calls: whatever slow drift a reset cannot undo
# (the engine's counters, the kernel's) stays bounded.
MAX_USES = 100
IDLE_S = 30.0
# With recycling, each caller (sample) keeps its own container between its calls, so the pool
# may hold this many more than it can run at once. An idle container costs ~4.4 MiB and no CPU;
# without the room, more callers than the bound would evict each other's on every call and pay
# for a new container each time (print(1) at 16 callers: 3.4 calls/s, against 18.6 with it).
KEEP_OWNED = 32
# A sample's calls are minutes apart when its model thinks long; its own container waits that
# long (idle, it costs memory only), while unused containers beyond the spare go after IDLE_S.
OWNED_IDLE_S = 300.0


Item = TypeVar("Item")


@dataclass
class Lease(Generic[Item]):
    """One container lent to one call; ``uses`` counts the calls it served before this one."""

    item: Item
    uses: int
    caller: Hashable = None
    idle_since: float = 0.0


class WarmPool(Generic[Item]):
    def __init__(
        self,
        create: Callable[[], Awaitable[Item]],
        destroy: Callable[[Item], Awaitable[None]],
        size: int,
        *,
        reset: Callable[[Item], Awaitable[None]] | None = None,
        capacity: Callable[[], int] = lambda: 1,
        max_uses: int = MAX_USES,
        idle_s: float = IDLE_S,
        owned_idle_s: float = OWNED_IDLE_S,
        keep_owned: int = KEEP_OWNED,
        first_retry_s: float = _FIRST_RETRY_S,
        max_retry_s: float = _MAX_RETRY_S,
    ) -> None:
        if size < 0:
            raise ValueError(f"pool size must be >= 0, got {size}")
        self.size = size
        self._create = create
        self._destroy = destroy
        self._reset = reset
        self._capacity = capacity
        self.max_uses = max_uses
        self.keep_owned = keep_owned
        self.idle_s = idle_s
        self.owned_idle_s = owned_idle_s
        self._idle: list[Lease[Item]] = []
        self._total = 0  # containers that exist or are being made, until destroyed
        self._in_use = 0
        self._resetting: dict[Hashable, int] = {}  # caller -> its containers being reset now
        self._changed = asyncio.Event()
        self._wake = asyncio.Event()
        self._filled = asyncio.Event()
        self._refill_task: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._closed = False
        self.last_error: BaseException | None = None
        self._first_retry_s = first_retry_s
        self._max_retry_s = max_retry_s
        self.created = 0
        self.recycled = 0

    @property
    def recycling(self) -> bool:
        """Containers are reused only by a pool that keeps any (``size`` > 0) and can reset them."""
        return self.size > 0 and self._reset is not None

    def bound(self) -> int:
        """At most this many containers exist: one per call that can run at once, plus the spare,
        plus (recycling) room for callers' own idle containers. Calls running at once are bounded
        by the execution slots, never by this."""
        owned = self.keep_owned if self.recycling else 0
        return max(1, self._capacity()) + self.size + owned

    def start(self) -> None:
        if self.size > 0 and self._refill_task is None:
            self._refill_task = asyncio.create_task(self._refill_forever(), name="sandbox-pool-refill")

    def take(self, caller: Hashable = None) -> Lease[Item] | None:
        """An idle container this caller may use, or None when there is none (never waits)."""
        index = self._pick(caller)
        if index is None:
            self._wake.set()
            return None
        lease = self._idle.pop(index)
        lease.caller = caller
        self._in_use += 1
        self._filled.clear()
        # Starting a container costs the engine ~0.1-0.3 s of CPU; on two cores doing that
        # during a short call slows the call itself, so the refill waits for the call to end,
        # or for a short delay, so that a long call does not leave the pool short.
        asyncio.get_running_loop().call_later(REFILL_DELAY_S, self._wake.set)
        return lease

    def _pick(self, caller: Hashable) -> int | None:
        """The caller's own container (the one used last), else a never-used one, else None."""
        newest = range(len(self._idle) - 1, -1, -1)
        own = next((i for i in newest if self._idle[i].uses and self._idle[i].caller == caller), None)
        if own is not None:
            return own
        return next((i for i in newest if not self._idle[i].uses), None)

    def _evict_for(self, caller: Hashable) -> Item | None:
        """At the bound: the longest-idle container of another caller, taken out to be removed."""
        victim = next(
            (i for i, lease in enumerate(self._idle) if lease.uses and lease.caller != caller), None
        )
        return None if victim is None else self._idle.pop(victim).item

    async def acquire(self, caller: Hashable = None) -> Lease[Item]:
        """A usable idle container, a new one while under the bound, or the next to come back."""
        while True:
            lease = self.take(caller)
            if lease is not None:
                return lease
            if self._resetting.get(caller):
                # Its own container is being reset (tens of ms): cheaper to wait for it than to
                # create one (hundreds) or to evict another caller's.
                self._changed.clear()
                await self._changed.wait()
                continue
            if self._total >= self.bound():
                victim = self._evict_for(caller)
                if victim is not None:
                    # Removed before its place is reused, so the bound holds at every instant;
                    # only a caller that finds nothing else pays for it.
                    try:
                        await self._discard(victim)
                    except Exception as exc:  # its place is freed all the same; the sweep retries
                        log.info("sandbox pool: an evicted container was not removed (%s)", exc)
                    continue
            if self._total < self.bound():
                self._total += 1
                self._in_use += 1
                try:
                    item = await self._create()
                except BaseException:
                    self._total -= 1
                    self._in_use -= 1
                    self._changed.set()
                    raise
                self.created += 1
                return Lease(item, 0, caller)
            self._changed.clear()
            await self._changed.wait()

    def give_back(self, lease: Lease[Item], reusable: bool) -> None:
        """The call is over. A container it left clean is reset and idles again; others go."""
        self._in_use -= 1
        lease.uses += 1
        if reusable and self.recycling and not self._closed and lease.uses < self.max_uses:
            self._resetting[lease.caller] = self._resetting.get(lease.caller, 0) + 1
            self._spawn(self._recycle(lease), "sandbox-recycle")
        else:
            self._spawn(self._discard(lease.item), "sandbox-remove")
        self._wake.set()

    def lost(self, lease: Lease[Item]) -> None:
        """The caller removed the container itself (cancelled, timed out, died)."""
        self._in_use -= 1
        self._forget_one()

    def drop_idle(self, dead: Callable[[Item], bool]) -> int:
        """Discard every idle item ``dead`` says is gone, so no later call meets it; how many.

        One container found dead while it waited usually means others died with it (an engine
        restart, `proctor sandbox cleanup --all` from elsewhere): they are all dropped at once.
        """
        gone = [lease for lease in self._idle if dead(lease.item)]
        for lease in gone:
            self._idle.remove(lease)
            self._spawn(self._discard(lease.item), "sandbox-remove-dead")
        return len(gone)

    @property
    def ready_count(self) -> int:
        return len(self._idle)

    @property
    def total(self) -> int:
        return self._total

    async def wait_full(self, timeout: float = 60.0) -> bool:
        """Wait until no reset or removal is pending and the spare is started (benchmarks, tests)."""
        deadline = time.monotonic() + timeout
        while self._background:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            await asyncio.wait(set(self._background), timeout=remaining)
        if self.size == 0:
            return True
        self._wake.set()
        try:
            await asyncio.wait_for(self._filled.wait(), max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            return False
        return True

    async def close(self) -> None:
        """Stop refilling and destroy every container the pool still holds."""
        self._closed = True
        if self._refill_task is not None:
            self._refill_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._refill_task
        while self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        leftovers = [lease.item for lease in self._idle]
        self._idle.clear()
        await asyncio.gather(*(self._discard(item) for item in leftovers), return_exceptions=True)

    # -- background ------------------------------------------------------------------------

    def _spawn(self, work: Awaitable[None], name: str) -> None:
        task = asyncio.ensure_future(work)
        task.set_name(name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _recycle(self, lease: Lease[Item]) -> None:
        try:
            await self._reset_and_return(lease)
        finally:
            left = self._resetting.pop(lease.caller, 1) - 1
            if left:
                self._resetting[lease.caller] = left
            self._changed.set()  # a caller waiting for this reset looks again, whatever came of it

    async def _reset_and_return(self, lease: Lease[Item]) -> None:
        assert self._reset is not None
        try:
            await self._reset(lease.item)
        except asyncio.CancelledError:
            await self._discard(lease.item)
            raise
        except Exception as exc:  # not proven clean: it goes, and a fresh one replaces it
            log.info("sandbox pool: a used container was not reset (%s); removing it", exc)
            await self._discard(lease.item)
            return
        if self._closed:
            await self._discard(lease.item)
            return
        self.recycled += 1
        lease.idle_since = time.monotonic()
        self._idle.append(lease)
        self._changed.set()

    async def _discard(self, item: Item) -> None:
        try:
            await self._destroy(item)
        finally:
            self._forget_one()

    def _forget_one(self) -> None:
        self._total -= 1
        self._changed.set()
        self._wake.set()

    def _spare_count(self) -> int:
        """Idle containers any caller may take: never used. A caller's own do not count."""
        return sum(1 for lease in self._idle if not lease.uses)

    def _trim_idle(self) -> None:
        """Remove a caller's own container idle for ``owned_idle_s``, and unused ones beyond the
        spare idle for ``idle_s``: the pool shrinks with demand."""
        now = time.monotonic()
        spare = self._spare_count()
        for lease in list(self._idle):
            if lease.uses:
                expired = now - lease.idle_since > self.owned_idle_s
            else:
                expired = spare > self.size and now - lease.idle_since > self.idle_s
                spare -= expired
            if expired:
                self._idle.remove(lease)
                self._spawn(self._discard(lease.item), "sandbox-trim")

    async def _refill_forever(self) -> None:
        retry_s = self._first_retry_s
        while not self._closed:
            self._trim_idle()
            # Spare containers are started only while under the bound and while no call is
            # waiting for one to come back: back-pressure applies to the refill too.
            spare = self._spare_count()
            if spare >= self.size or self._total >= self.bound():
                if spare >= self.size and not self._background:
                    self._filled.set()
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.idle_s)
                continue
            self._total += 1
            try:
                item = await self._create()
            except asyncio.CancelledError:
                self._total -= 1
                raise
            except Exception as exc:  # keep serving: calls fall back to on-demand containers
                self._total -= 1
                self.last_error = exc
                log.warning(
                    "sandbox pool: could not start a warm container (retrying in %.0f s): %s", retry_s, exc
                )
                await asyncio.sleep(retry_s)
                retry_s = min(retry_s * 2, self._max_retry_s)
                continue
            retry_s = self._first_retry_s
            self.created += 1
            if self._closed:
                await self._discard(item)
                return
            self._idle.append(Lease(item, 0, None, time.monotonic()))
            self._changed.set()
