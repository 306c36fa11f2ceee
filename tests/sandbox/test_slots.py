"""The process-wide execution bound: how many run at once, who goes next, what a wait costs."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from proctor.sandbox import ExecResult, InvalidProgram, Limits, execution_caller
from proctor.sandbox.slots import ExecutionSlots, LimitedSandbox


class RecordingSandbox:
    """A backend double that records when each call ran and what it was given."""

    backend = "double"

    def __init__(self) -> None:
        self.running = 0
        self.peak = 0
        self.order: list[str] = []
        self.timeouts: list[float] = []
        self.gate = asyncio.Event()
        self.gate.set()

    async def exec(
        self,
        code: str | None = None,
        *,
        argv: Sequence[str] | None = None,
        stdin: str | bytes | None = None,
        timeout: float = 30.0,
        limits: Limits | None = None,
    ) -> ExecResult:
        self.running += 1
        self.peak = max(self.peak, self.running)
        self.order.append(code or "")
        self.timeouts.append(timeout)
        await self.gate.wait()
        await asyncio.sleep(0.001)
        self.running -= 1
        return ExecResult(exit_code=0, stdout="", stderr="", backend=self.backend)

    def describe(self) -> dict[str, Any]:
        return {"backend": self.backend}

    async def aclose(self) -> None:
        return None


async def test_never_more_than_the_capacity_run_at_once() -> None:
    inner = RecordingSandbox()
    limited = LimitedSandbox(inner, ExecutionSlots(3))
    await asyncio.gather(*(limited.exec(f"print({i})", timeout=7) for i in range(40)))
    assert inner.peak == 3 and len(inner.order) == 40
    # The time limit reaches the backend untouched: the wait is not deducted from it.
    assert set(inner.timeouts) == {7}
    assert limited.describe()["max_concurrent_executions"] == 3


async def test_a_late_single_call_is_not_queued_behind_another_callers_sixty() -> None:
    inner = RecordingSandbox()
    inner.gate.clear()
    limited = LimitedSandbox(inner, ExecutionSlots(2))

    async def sample(name: str, calls: int) -> None:
        with execution_caller(name):
            await asyncio.gather(*(limited.exec(f"{name}-{i}") for i in range(calls)))

    many = asyncio.create_task(sample("many", 60))
    await asyncio.sleep(0.01)  # two of the sixty run (held at the gate), fifty-eight wait
    assert len(inner.order) == 2
    one = asyncio.create_task(sample("one", 1))
    await asyncio.sleep(0.01)
    inner.gate.set()
    await asyncio.gather(many, one)
    # It goes after at most one more of the sixty, not after all of them.
    assert inner.order.index("one-0") <= 3, inner.order[:6]


async def test_round_robin_between_three_callers() -> None:
    slots = ExecutionSlots(1)
    granted: list[str] = []
    await slots.acquire("hold")

    async def take(caller: str) -> None:
        async with slots.slot(caller):
            granted.append(caller)

    tasks = [asyncio.create_task(take(c)) for c in ["a"] * 3 + ["b"] * 3 + ["c"] * 3]
    await asyncio.sleep(0)
    slots.release()
    await asyncio.gather(*tasks)
    assert granted == ["a", "b", "c"] * 3


async def test_cancelled_waiters_and_cancelled_holders_leak_no_slot() -> None:
    slots = ExecutionSlots(1)
    await slots.acquire()
    waiting = asyncio.create_task(slots.acquire("x"))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    # Granted and cancelled in the same breath: the slot passes on instead of leaking.
    granted_then_cancelled = asyncio.create_task(slots.acquire("y"))
    await asyncio.sleep(0)
    slots.release()
    granted_then_cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await granted_then_cancelled
    assert slots.in_use == 0
    await asyncio.wait_for(slots.acquire(), 1)
    assert slots.in_use == 1


async def test_invalid_code_is_refused_at_once_even_when_every_slot_is_taken() -> None:
    slots = ExecutionSlots(1)
    await slots.acquire()
    limited = LimitedSandbox(RecordingSandbox(), slots)
    for bad in ("print(1)\0", "print('\ud800')"):
        with pytest.raises(InvalidProgram):
            await asyncio.wait_for(limited.exec(bad), 1)
    with pytest.raises(InvalidProgram):
        await asyncio.wait_for(limited.exec(argv=["python3", "-c", "\0"]), 1)


def test_one_bound_across_event_loops_in_several_threads() -> None:
    slots = ExecutionSlots(2)
    lock = threading.Lock()
    running = peak = 0

    async def calls() -> None:
        async def one() -> None:
            nonlocal running, peak
            async with slots.slot():
                with lock:
                    running += 1
                    peak = max(peak, running)
                await asyncio.sleep(0.005)
                with lock:
                    running -= 1

        await asyncio.gather(*(one() for _ in range(15)))

    threads = [threading.Thread(target=asyncio.run, args=(calls(),)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert peak == 2 and slots.in_use == 0


def test_a_bound_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        ExecutionSlots(0)


def test_the_bound_is_configured_by_file_and_flag_and_checked(tmp_path: Path) -> None:
    from proctor.agent.errors import UserError
    from proctor.agent.run.config_loader import RunFlags, load_run_config

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"id": "t"}\n')
    config_file = tmp_path / "run.yaml"
    config_file.write_text(f"tasks: {tasks}\nmodels: [openai/a]\nsandbox: {{max_concurrent_executions: 3}}\n")
    assert load_run_config(config_file, RunFlags()).sandbox.max_concurrent_executions == 3
    flagged = load_run_config(config_file, RunFlags(max_sandbox_concurrency=5))
    assert flagged.sandbox.max_concurrent_executions == 5
    config_file.write_text(f"tasks: {tasks}\nmodels: [openai/a]\n")
    assert load_run_config(config_file, RunFlags()).sandbox.max_concurrent_executions is None
    with pytest.raises(UserError) as caught:
        load_run_config(config_file, RunFlags(max_sandbox_concurrency=0))
    assert "sandbox.max_concurrent_executions" in str(caught.value) and "\n" not in str(caught.value)
