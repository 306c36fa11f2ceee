"""The warm pool's sizing without an engine: it grows with demand up to its bound, then makes
callers wait (back-pressure); it recycles only what its reset proves clean; it shrinks when idle."""

from __future__ import annotations

import asyncio

import pytest

from proctor.sandbox.pool import Lease, WarmPool

pytestmark = pytest.mark.asyncio


class Engine:
    """Fake create/destroy/reset that count what the pool asks for."""

    def __init__(self, reset_fails: bool = False) -> None:
        self.made: list[str] = []
        self.destroyed: list[str] = []
        self.resets: list[str] = []
        self.reset_fails = reset_fails
        self.alive = 0
        self.peak_alive = 0

    async def create(self) -> str:
        self.alive += 1
        self.peak_alive = max(self.peak_alive, self.alive)
        await asyncio.sleep(0.01)
        self.made.append(f"c{len(self.made)}")
        return self.made[-1]

    async def destroy(self, item: str) -> None:
        self.alive -= 1
        self.destroyed.append(item)

    async def reset(self, item: str) -> None:
        await asyncio.sleep(0.01)
        self.resets.append(item)
        if self.reset_fails:
            raise RuntimeError("not clean")

    def pool(self, size: int, capacity: int, **kwargs: float) -> WarmPool[str]:
        return WarmPool(
            self.create, self.destroy, size, reset=self.reset, capacity=lambda: capacity, **kwargs
        )  # type: ignore[arg-type]


async def test_grows_with_demand_to_the_bound_then_callers_wait_for_a_container() -> None:
    engine = Engine()
    pool = engine.pool(size=1, capacity=3)
    pool.start()
    assert await pool.wait_full(5)
    leases = [await pool.acquire(caller) for caller in range(4)]  # one spare + three on demand
    assert pool.total == 4 == pool.bound() and len(engine.made) == 4
    waiting = asyncio.ensure_future(pool.acquire("fifth"))
    await asyncio.sleep(0.1)
    assert not waiting.done(), "at the bound a call must wait, not create"
    pool.give_back(leases[0], reusable=True)
    fifth = await asyncio.wait_for(waiting, 5)
    assert fifth.item == leases[0].item and fifth.uses == 1  # the recycled one, after its reset
    assert len(engine.made) == 4 and engine.peak_alive <= pool.bound()
    for lease in [*leases[1:], fifth]:
        pool.give_back(lease, reusable=True)
    await pool.close()
    assert engine.alive == 0 and sorted(engine.destroyed) == sorted(engine.made)


async def test_a_container_whose_reset_fails_is_destroyed_and_replaced() -> None:
    engine = Engine(reset_fails=True)
    pool = engine.pool(size=1, capacity=1)
    pool.start()
    lease = await pool.acquire()
    pool.give_back(lease, reusable=True)
    assert await pool.wait_full(5)
    assert engine.resets == [lease.item] and lease.item in engine.destroyed
    again = await pool.acquire()
    assert again.item != lease.item and again.uses == 0
    pool.give_back(again, reusable=False)  # the call left it unclean: never even reset
    assert await pool.wait_full(5)
    assert engine.resets == [lease.item] and again.item in engine.destroyed
    await pool.close()


async def test_a_container_serves_at_most_max_uses_calls() -> None:
    engine = Engine()
    pool = engine.pool(size=1, capacity=1, max_uses=3)
    pool.start()
    seen: list[tuple[str, int]] = []
    for _ in range(7):
        assert await pool.wait_full(5)
        lease = await pool.acquire()
        seen.append((lease.item, lease.uses))
        pool.give_back(lease, reusable=True)
    assert max(uses for _, uses in seen) == 2
    assert all(sum(1 for item, _ in seen if item == name) <= 3 for name in engine.made)
    await pool.close()


async def test_prefers_the_container_its_own_caller_used_last() -> None:
    engine = Engine()
    pool = engine.pool(size=2, capacity=2)
    pool.start()
    assert await pool.wait_full(5)
    mine, theirs = await pool.acquire("me"), await pool.acquire("them")
    pool.give_back(mine, reusable=True)
    pool.give_back(theirs, reusable=True)
    assert await pool.wait_full(5)
    assert (await pool.acquire("them")).item == theirs.item
    assert (await pool.acquire("me")).item == mine.item
    await pool.close()


async def test_shrinks_back_to_the_spare_when_demand_falls() -> None:
    engine = Engine()
    pool = engine.pool(size=1, capacity=4, idle_s=0.2)
    pool.start()
    leases: list[Lease[str]] = [await pool.acquire(caller) for caller in range(5)]
    for lease in leases:
        pool.give_back(lease, reusable=True)
    assert await pool.wait_full(5)
    assert pool.ready_count == 5
    for _ in range(40):
        await asyncio.sleep(0.1)
        if pool.total == 1:
            break
    assert pool.total == 1 and pool.ready_count == 1
    await pool.close()
    assert engine.alive == 0


async def test_lost_containers_free_their_place_under_the_bound() -> None:
    engine = Engine()
    pool = engine.pool(size=0, capacity=1)
    first = await pool.acquire()
    assert pool.total == 1 == pool.bound()
    waiting = asyncio.ensure_future(pool.acquire())
    await asyncio.sleep(0.05)
    assert not waiting.done()
    pool.lost(first)  # the call removed it itself (timeout, cancellation)
    second = await asyncio.wait_for(waiting, 5)
    assert second.item != first.item
    pool.give_back(second, reusable=True)  # size 0: no recycling, it goes
    await pool.close()
    assert second.item in engine.destroyed and not pool.recycling


async def test_dead_idle_containers_are_dropped_at_once_and_replaced() -> None:
    engine = Engine()
    pool = engine.pool(size=3, capacity=4)
    pool.start()
    assert await pool.wait_full(5)
    assert pool.ready_count == 3 and pool.total == 3
    dead = {"c0", "c2"}
    assert pool.drop_idle(lambda item: item in dead) == 2
    assert pool.ready_count == 1
    # The survivor is what the next call gets; the dead ones are destroyed and the spare refilled.
    lease = await pool.acquire("caller")
    assert lease.item == "c1"
    pool.give_back(lease, reusable=True)
    assert await pool.wait_full(5)
    assert set(engine.destroyed) >= dead and pool.ready_count == 3
    assert all(item not in dead for item in (lease.item for lease in pool._idle))
    await pool.close()
