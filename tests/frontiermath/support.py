"""Helpers shared by the FrontierMath tests: contexts, configs and scripted model clients."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from proctor.agent.inputs.config import BudgetConfig, ModelConfig, RunConfig, SandboxConfig
from proctor.agent.model.base import ModelClient
from proctor.agent.model.factory import make_client
from proctor.agent.tracks.base import SampleContext
from proctor.agent.tracks.frontiermath.tasks import FrontierMathTask
from proctor.sandbox import Sandbox


class RecordingEvents:
    """RunEvents that remember what the track reported."""

    def __init__(self) -> None:
        self.sandbox_started = 0
        self.sandbox_finished: list[float] = []
        self.tokens: list[int] = []
        self.retries: list[str] = []
        self.calls_started: list[int] = []
        self.turns_finished: list[tuple[int, int]] = []
        self.in_flight = 0
        self.max_in_flight = 0

    def sandbox_call_started(self) -> None:
        self.sandbox_started += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def sandbox_call_finished(self, duration_s: float) -> None:
        self.in_flight -= 1
        self.sandbox_finished.append(duration_s)

    def model_retry(self, reason: str) -> None:
        self.retries.append(reason)

    def tokens_used(self, count: int) -> None:
        self.tokens.append(count)

    def model_call_started(self, turn: int) -> None:
        self.calls_started.append(turn)

    def turn_finished(self, turn: int, tokens: int) -> None:
        self.turns_finished.append((turn, tokens))


def run_config(
    *,
    token_cap: int = 1_000_000,
    force_submit_at: int = 660_000,
    max_output_tokens: int | None = None,
    tool_output_chars: int = 20_000,
    timeout_s: float = 10.0,
    answer_timeout_s: float = 10.0,
    verify_timeout_s: float = 20.0,
    track_options: dict[str, Any] | None = None,
    prompt_template: Path | None = None,
    protocol: str = "methodology",
) -> RunConfig:
    return RunConfig(
        tasks=Path("tasks.jsonl"),
        models=[ModelConfig(name="openai/scripted-model")],
        budget=BudgetConfig(
            token_cap=token_cap, force_submit_at=force_submit_at, max_output_tokens=max_output_tokens
        ),
        sandbox=SandboxConfig(
            backend="local",
            timeout_s=timeout_s,
            answer_timeout_s=answer_timeout_s,
            verify_timeout_s=verify_timeout_s,
            tool_output_chars=tool_output_chars,
        ),
        track_options=track_options or {},
        prompt_template=prompt_template,
        protocol=protocol,
    )


def scripted_client(base_url: str) -> ModelClient:
    """The project's real Chat Completions client (openai SDK) pointed at a scripted server."""
    return make_client(ModelConfig(name="openai/scripted-model", base_url=base_url, max_retries=0))


def context(model: ModelClient, sandbox: Sandbox, config: RunConfig, events: Any = None) -> SampleContext:
    return SampleContext(
        run_id="test-run",
        model=model,
        model_name="openai/scripted-model",
        reasoning_effort=None,
        sandbox=sandbox,
        config=config,
        judge=None,
        events=events or RecordingEvents(),
    )


def integer_task(answer: str = "42", **extra: Any) -> FrontierMathTask:
    return FrontierMathTask(
        id=extra.pop("id", "t-int"),
        question="What is six times seven?",
        answer_type="Python int",
        answer=answer,
        subject="arithmetic",
        **extra,
    )
