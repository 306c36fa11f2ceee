"""Dataset QA before spending tokens: run each task's reference_solution through the submission path."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from proctor.agent.inputs.config import SandboxConfig
from proctor.agent.results.records import Outcome
from proctor.agent.tracks.base import NullEvents, RunEvents
from proctor.agent.tracks.frontiermath.submission import SubmissionRunner
from proctor.agent.tracks.frontiermath.tasks import FrontierMathTask
from proctor.sandbox import Sandbox


@dataclass(frozen=True)
class ReferenceCheck:
    task_id: str
    # None when the task has no reference_solution to check.
    outcome: Outcome | None
    error: str | None
    value: str | None
    duration_s: float
    # The reference evaluates to a float although the task's answer kind is exact (e.g.
    # `188684/15015` written where `Rational(188684, 15015)` was meant): a wrong exact answer
    # could pass.
    inexact_reference: bool = False
    # The kind of value the task wants and where it came from (stated, or inferred at load).
    answer_kind: str = "exact"
    answer_kind_origin: str = ""

    @property
    def passed(self) -> bool:
        return self.outcome is Outcome.CORRECT and not self.inexact_reference

    @property
    def checked(self) -> bool:
        return self.outcome is not None


async def check_reference(task: FrontierMathTask, runner: SubmissionRunner) -> ReferenceCheck:
    kind, origin = task.wanted_kind, task.answer_kind_origin
    if task.reference_solution is None:
        return ReferenceCheck(
            task.id, None, "no reference_solution", None, 0.0, answer_kind=kind, answer_kind_origin=origin
        )
    started = time.monotonic()
    # Exactly the path a model's submission takes, checks included.
    result = await runner.evaluate(task.reference_solution, task, enforce_checks=True)
    inexact = result.record.reference_inexact and task.exact_kind
    error = result.error
    if inexact:
        error = (
            f"the expected answer evaluates to a float, but the task's answer kind is exact "
            f"({task.answer_kind_origin}): write it exactly (integers, Rational, sympy constants) "
            "or state 'answer_kind': 'floating-point' with a tolerance"
        )
    duration = time.monotonic() - started
    return ReferenceCheck(
        task.id,
        result.outcome,
        error,
        result.record.value_repr,
        duration,
        inexact,
        answer_kind=kind,
        answer_kind_origin=origin,
    )


async def check_references(
    tasks: list[FrontierMathTask],
    sandbox: Sandbox,
    config: SandboxConfig,
    *,
    concurrency: int = 2,
    events: RunEvents | None = None,
) -> list[ReferenceCheck]:
    """Checks in task order; at most ``concurrency`` references run at once."""
    runner = SubmissionRunner(sandbox, config, events or NullEvents())
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(task: FrontierMathTask) -> ReferenceCheck:
        async with gate:
            return await check_reference(task, runner)

    return list(await asyncio.gather(*(one(task) for task in tasks)))
