"""A small real Track for runner tests: one model call per sample, scored by exact match.

It goes through the real model client (openai SDK) to whatever server the test starts, so
the runner is exercised end to end without depending on a particular track's protocol.
Task file lines: {"id", "question", "answer", "subject"?, "metadata"?}.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from proctor.agent.errors import UserError
from proctor.agent.results.records import Outcome, SampleRecord, ToolCallRecord, TurnUsage
from proctor.agent.tracks.base import SampleContext, Track


@dataclass
class EchoTask:
    id: str
    question: str
    answer: str
    subject: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat()


class EchoTrack(Track):
    name: ClassVar[str] = "echo"
    needs_sandbox: ClassVar[bool] = False

    def load_tasks(self, path: Path) -> list[Any]:
        tasks = []
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            data = json.loads(line)
            if "id" not in data:
                raise UserError(f"{path}: line {number}: field 'id': missing")
            tasks.append(EchoTask(**data))
        return tasks

    async def _extra(self, ctx: SampleContext, record: dict[str, Any]) -> None:
        """Hook for subclasses (the sandbox variant runs one program here)."""

    async def run_sample(self, task: Any, trial: int, ctx: SampleContext) -> SampleRecord:
        started_at, started = _now(), time.monotonic()
        messages = [{"role": "user", "content": task.question}]
        response = await ctx.model.complete(messages)
        ctx.events.tokens_used(response.usage.total)
        content = (response.content or "").strip()
        success = content == task.answer
        extra: dict[str, Any] = {}
        await self._extra(ctx, extra)
        return SampleRecord(
            run_id=ctx.run_id,
            track=self.name,
            task_id=task.id,
            trial=trial,
            model=ctx.model_name,
            subject=task.subject,
            reasoning_effort=ctx.reasoning_effort,
            outcome=Outcome.CORRECT if success else Outcome.INCORRECT,
            score=1.0 if success else 0.0,
            success=success,
            input_tokens=response.usage.input_tokens,
            output_tokens=response.usage.output_tokens,
            total_tokens=response.usage.total,
            turns=[
                TurnUsage(
                    turn=1,
                    input_tokens=response.usage.input_tokens,
                    output_tokens=response.usage.output_tokens,
                    cumulative_tokens=response.usage.total,
                )
            ],
            transcript=[*messages, response.as_message()],
            retries=response.retries,
            started_at=started_at,
            finished_at=_now(),
            duration_s=time.monotonic() - started,
            **extra,
        )


class SandboxEchoTrack(EchoTrack):
    """Also runs one program in the run's sandbox, to check the runner opens and shares it."""

    name: ClassVar[str] = "echo-sandbox"
    needs_sandbox: ClassVar[bool] = True

    async def _extra(self, ctx: SampleContext, record: dict[str, Any]) -> None:
        assert ctx.sandbox is not None
        ctx.events.sandbox_call_started()
        result = await ctx.sandbox.exec("print(6 * 7)", timeout=30)
        ctx.events.sandbox_call_finished(result.duration_s)
        record["tool_calls"] = [
            ToolCallRecord(
                turn=1,
                call_id="c1",
                name="python",
                raw_arguments="{}",
                result=result.stdout,
                duration_s=result.duration_s,
                sandbox=result.to_dict(),
            )
        ]
        record["sandbox_image"] = result.image


class CrashingEchoTrack(EchoTrack):
    """Raises a harness bug on questions containing 'crash' (exercises harness_error records)."""

    name: ClassVar[str] = "echo-crash"

    async def run_sample(self, task: Any, trial: int, ctx: SampleContext) -> SampleRecord:
        if "crash" in task.question:
            raise RuntimeError(f"harness bug on {task.id}")
        return await super().run_sample(task, trial, ctx)


def register() -> None:
    """Make the test tracks reachable by name through the real registry."""
    from proctor.agent.tracks import registry

    registry._TRACKS["echo"] = "tests.runner.echo_track:EchoTrack"
    registry._TRACKS["echo-sandbox"] = "tests.runner.echo_track:SandboxEchoTrack"
    registry._TRACKS["echo-crash"] = "tests.runner.echo_track:CrashingEchoTrack"
