"""Helpers for the judge-track tests: an in-process ModelClient and a SampleContext."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from proctor.agent.inputs.config import ModelConfig, RunConfig
from proctor.agent.model.base import ChatResponse, ModelClient, ModelError, Usage
from proctor.agent.tracks.base import NullEvents, SampleContext

REPO_ROOT = Path(__file__).resolve().parents[2]
# The paper's appendix B as quoted by the seed document, shipped with the tests: a fresh clone
# needs nothing beside it. PROCTOR_SEED_APPENDIX points at another copy to compare against.
SEED_PAPER = Path(
    os.environ.get(
        "PROCTOR_SEED_APPENDIX", Path(__file__).with_name("fixtures") / "frontierscience-appendix-b.zh.txt"
    )
)
GOLD_DIR = Path(
    os.environ.get("PROCTOR_FRONTIERSCIENCE_DIR", REPO_ROOT / "configs" / "data" / "frontierscience")
)

Scripted = str | None | ChatResponse | Exception


class ListClient:
    """Answers each ``complete`` with the next scripted item; records every request."""

    def __init__(self, replies: Sequence[Scripted], model: str = "fake-model") -> None:
        self.model = model
        self._replies = list(replies)
        self.requests: list[list[dict[str, Any]]] = []

    async def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        max_output_tokens: int | None = None,
    ) -> ChatResponse:
        self.requests.append([dict(m) for m in messages])
        if not self._replies:
            raise AssertionError(f"{self.model}: more requests than scripted replies")
        item = self._replies.pop(0)
        if isinstance(item, Exception):
            raise item
        if isinstance(item, ChatResponse):
            return item
        return ChatResponse(content=item, tool_calls=[], usage=Usage(input_tokens=100, output_tokens=20))

    async def aclose(self) -> None:
        pass


def make_ctx(
    model: ModelClient,
    judge: ModelClient | None,
    *,
    max_output_tokens: int | None = None,
    prompt_template: Path | None = None,
) -> SampleContext:
    config = RunConfig.model_validate(
        {
            "track": "olympiad",
            "tasks": "unused.jsonl",
            "models": [{"name": "openai/fake-model"}],
            "budget": {"max_output_tokens": max_output_tokens},
            "prompt_template": prompt_template,
        }
    )
    return SampleContext(
        run_id="run-test",
        model=model,
        model_name=model.model,
        reasoning_effort="high",
        sandbox=None,
        config=config,
        judge=judge,
        events=NullEvents(),
    )


__all__ = ["GOLD_DIR", "REPO_ROOT", "SEED_PAPER", "ListClient", "ModelConfig", "ModelError", "make_ctx"]
