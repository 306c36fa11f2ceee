"""The warm pool's sizing without an engine: it grows with demand up to its bound, then makes
callers wait (back-pressure); it recycles only what its reset proves clean; it shrinks when idle."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.sandbox.docker.pool import Lease, WarmPool


class Engine:
    """Fake create/destroy/reset that count what the pool asks for."""

    def __init__(self, reset_fails: bool = False, create_s: float = 0.01) -> None:
        self.create_s = create_s
        self.made: list[str] = []
        self.destroyed: list[str] = []
        self.resets: list[str] = []
        self.reset_fails = reset_fails
        self.alive = 0
        self.peak_alive = 0

    async def create(self) -> str:
        await asyncio.sleep(self.create_s)  # a creation cancelled here leaves nothing, like the engine's
        self.alive += 1
        self.peak_alive = max(self.peak_alive, self.alive)
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

    def pool(self, size: int, capacity: int, keep_owned: int = 0, **kwargs: float) -> WarmPool[str]:
        return WarmPool(
            self.create,
            self.destroy,
            size,
            reset=self.reset,
            capacity=lambda: capacity,
            keep_owned=keep_owned,
            **kwargs,  # type: ignore[arg-type]
        )


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
    # Caller 0's container, once reset, never serves another caller: it is removed to make room.
    assert fifth.item not in {lease.item for lease in leases} and fifth.uses == 0
    assert leases[0].item in engine.destroyed
    assert len(engine.made) == 5 and engine.peak_alive <= pool.bound()
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


async def test_a_used_container_never_serves_another_caller() -> None:
    """What a reset cannot clear (the next PID, IPC and inode counters) must never link two
    samples: a recycled container goes back only to the caller that used it."""
    engine = Engine()
    pool = engine.pool(size=2, capacity=2)
    pool.start()
    assert await pool.wait_full(5)
    mine = await pool.acquire("me")
    pool.give_back(mine, reusable=True)
    assert await pool.wait_full(5)
    assert mine.item in {lease.item for lease in pool._idle}  # reset and idle, owned by "me"
    others = [await pool.acquire(f"other-{n}") for n in range(4)]  # up to and past the bound
    assert mine.item not in {lease.item for lease in others}
    assert mine.item in engine.destroyed  # removed to make room, not handed over
    assert all(lease.uses == 0 for lease in others)
    for lease in others:
        pool.give_back(lease, reusable=True)
    await pool.close()


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from("abcd"), st.booleans()), min_size=1, max_size=30),
    st.sampled_from([0, 2]),
)
def test_random_call_sequences_never_share_a_container_between_callers(
    calls: list[tuple[str, bool]], keep_owned: int
) -> None:
    async def scenario() -> dict[str, set[str]]:
        engine = Engine()
        pool = engine.pool(size=1, capacity=2, keep_owned=keep_owned)
        pool.start()
        served: dict[str, set[str]] = {}
        held: list[Lease[str]] = []
        for caller, clean in calls:
            if len(held) == 2:  # the bound's calls are running: one ends first
                pool.give_back(held.pop(0), reusable=clean)
            lease = await asyncio.wait_for(pool.acquire(caller), 5)
            served.setdefault(lease.item, set()).add(caller)
            held.append(lease)
            await asyncio.sleep(0)
        for lease in held:
            pool.give_back(lease, reusable=True)
        await pool.close()
        assert engine.alive == 0
        return served

    served = asyncio.run(scenario())
    assert all(len(callers) == 1 for callers in served.values()), served


async def test_shrinks_back_to_the_spare_when_demand_falls() -> None:
    engine = Engine()
    pool = engine.pool(size=1, capacity=4, idle_s=0.2, owned_idle_s=0.2)
    pool.start()
    leases: list[Lease[str]] = [await pool.acquire(caller) for caller in range(5)]
    for lease in leases:
        pool.give_back(lease, reusable=True)
    for _ in range(40):
        await asyncio.sleep(0.1)
        if pool.total == 1 and pool.ready_count == 1:
            break
    # Every caller's container was reset, idled past its time and went; the spare is new.
    assert sorted(engine.resets) == sorted(lease.item for lease in leases)
    assert {lease.item for lease in leases} <= set(engine.destroyed)
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


async def test_a_caller_waits_for_its_own_reset_rather_than_creating_or_evicting() -> None:
    """Back-to-back calls of one sample: its container is being reset when the next call comes;
    a reset takes tens of ms, a new container hundreds, so the call waits for its own."""
    engine = Engine(create_s=0.3)
    pool = engine.pool(size=1, capacity=2)
    pool.start()
    assert await pool.wait_full(5)
    first = await pool.acquire("me")  # the spare; the refill starts another (0.3 s)
    pool.give_back(first, reusable=True)  # the reset (0.01 s) starts in the background
    again = await asyncio.wait_for(pool.acquire("me"), 5)
    assert again.item == first.item and again.uses == 1
    assert engine.resets == [first.item] and len(engine.made) <= 2  # nothing made for this call
    pool.give_back(again, reusable=True)
    await pool.close()
    assert engine.alive == 0


async def test_more_callers_than_slots_each_keep_their_own_container() -> None:
    """Sixteen samples on two slots: each keeps its container between its calls (room for owned
    containers), instead of evicting another's and paying for a new one every call."""
    engine = Engine()
    pool = engine.pool(size=1, capacity=2, keep_owned=32)
    pool.start()
    assert pool.bound() == 2 + 1 + 32
    for _ in range(3):
        for caller in range(16):
            lease = await asyncio.wait_for(pool.acquire(caller), 5)
            pool.give_back(lease, reusable=True)
            assert await pool.wait_full(5)
    assert len(engine.made) <= 16 + 1 and not engine.destroyed  # one per caller (+ the spare)
    await pool.close()
    assert engine.alive == 0


async def test_a_callers_own_container_outlives_the_idle_time_of_unused_ones() -> None:
    """A sample's next call may come minutes later (a model thinking): its own container stays
    for ``owned_idle_s``, while unused containers beyond the spare go after ``idle_s``."""
    engine = Engine()
    pool = engine.pool(size=1, capacity=2, keep_owned=4, idle_s=0.1, owned_idle_s=1.0)
    pool.start()
    # Closed here, not left to the event loop's teardown: cancelling the pool's tasks there
    # once hung the test's teardown until the 120 s timeout.
    try:
        mine = await pool.acquire("me")
        pool.give_back(mine, reusable=True)
        assert await pool.wait_full(5)
        await asyncio.sleep(0.4)
        pool._wake.set()
        await asyncio.sleep(0.1)
        assert (await pool.acquire("me")).item == mine.item  # still there after idle_s
        pool.give_back(mine, reusable=True)
        for _ in range(30):
            await asyncio.sleep(0.1)
            pool._wake.set()
            if mine.item in engine.destroyed:
                break
        assert mine.item in engine.destroyed  # gone after owned_idle_s
    finally:
        await pool.close()
    assert engine.alive == 0


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
    # The given-back one is its caller's own now; the spare (never-used containers) is full again.
    assert set(engine.destroyed) >= dead and pool._spare_count() == 3
    assert all(item not in dead for item in (lease.item for lease in pool._idle))
    await pool.close()
