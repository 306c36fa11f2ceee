"""The contract every model client meets; the loop and judges depend only on this."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


class ModelError(RuntimeError):
    """The endpoint failed for good: auth or quota errors, or retries exhausted."""


class EndpointRefused(ModelError):
    """The endpoint refuses every request until a person acts: credentials refused (``auth``)
    or the quota spent (``quota``). Waiting cannot fix it, so a run stops instead of going on."""

    def __init__(self, message: str, *, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class ToolCall:
    """One call, always well-formed strings; ``reply_shapes`` makes it so from any reply."""

    id: str
    name: str
    # Kept raw: small models send malformed JSON and the loop must report, not crash.
    arguments: str
    # Where the server's call left the OpenAI shape (e.g. "no id (null); Proctor called it ...").
    deviations: list[str] = field(default_factory=list)
    # Set when the call cannot run as sent; the text is the tool error the model gets back.
    problem: str | None = None


@dataclass
class Usage:
    input_tokens: int
    output_tokens: int
    reasoning_tokens: int = 0
    # True when the provider reported no usage and tiktoken estimated it.
    estimated: bool = False

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass
class ChatResponse:
    content: str | None
    tool_calls: list[ToolCall]
    usage: Usage
    finish_reason: str | None = None
    # Retries this call needed before it succeeded, for the progress display and record.
    retries: int = 0
    reasoning: str | None = None
    raw: dict[str, Any] = field(default_factory=dict)
    # The model declined (Chat Completions ``refusal``); its text, when it sent one.
    refusal: str | None = None
    # Where the reply left the OpenAI shape (content not text, no choices, ...), for the record.
    deviations: list[str] = field(default_factory=list)

    def as_message(self) -> dict[str, Any]:
        """The assistant message in Chat Completions form, ready to append to history."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.tool_calls
            ]
        return message


def reply_notes(response: ChatResponse) -> dict[str, Any]:
    """What a transcript keeps beside the message: a refusal, and how the reply broke shape."""
    notes: dict[str, Any] = {}
    if response.refusal:
        notes["refusal"] = response.refusal
    if response.deviations:
        notes["reply_deviations"] = list(response.deviations)
    return notes


class ModelClient(Protocol):
    """One model at one endpoint. ``messages`` are Chat Completions-style dicts."""

    model: str

    async def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        max_output_tokens: int | None = None,
    ) -> ChatResponse: ...

    async def aclose(self) -> None: ...
