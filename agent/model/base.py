"""The contract every model client meets; the loop and judges depend only on this."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from proctor.agent.model.provider_outcome import ProviderVerdict

# Where an assistant message (Chat Completions form) carries its reply's Responses API output
# layout, reasoning items included, to the next request (agent/model/reasoning_items.py). Only
# the Responses client reads it; records keep the size-capped ``reasoning_items`` instead.
REPLAY_KEY = "responses_output"


class ModelError(RuntimeError):
    """The endpoint failed for good: auth or quota errors, or retries exhausted."""


class EndpointRefused(ModelError):
    """The endpoint refuses every request until a person acts: credentials refused (``auth``)
    or the quota spent (``quota``). Waiting cannot fix it, so a run stops instead of going on."""

    def __init__(self, message: str, *, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


class ProviderRefusal(ModelError):
    """The provider refused the model's own conversation (context overflow, policy refusal,
    content filter): the model's outcome, scored, not retried and not re-run on ``--resume``
    (agent/model/provider_outcome.py)."""

    def __init__(self, endpoint: str, verdict: ProviderVerdict) -> None:
        super().__init__(f"{endpoint}: {verdict.describe()}")
        self.verdict = verdict


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
    # Every output token, reasoning included wherever the provider reported it
    # (agent/model/usage.py reads each provider's shape into this one).
    output_tokens: int
    reasoning_tokens: int = 0
    # True when the provider reported no usage and tiktoken estimated it.
    estimated: bool = False
    # The reply's whole count when the provider's total is above input + output; None: no more.
    counted: int | None = None
    # How the provider reported it (``agent.model.usage.UsageShape``); None when not read from
    # a reply (a test's or an estimate's own Usage).
    shape: str | None = None

    @property
    def total(self) -> int:
        """What this reply counts toward the token cap."""
        return max(self.input_tokens + self.output_tokens, self.counted or 0)


@dataclass
class ChatResponse:
    content: str | None
    tool_calls: list[ToolCall]
    usage: Usage
    finish_reason: str | None = None
    # Retries this call needed before it succeeded, for the progress display and record.
    retries: int = 0
    reasoning: str | None = None
    # The model declined (Chat Completions ``refusal``); its text, when it sent one.
    refusal: str | None = None
    # Where the reply left the OpenAI shape (content not text, no choices, ...), for the record.
    deviations: list[str] = field(default_factory=list)
    # Responses API: the output's order with the reasoning items to send back next turn
    # (opaque provider data, never interpreted); empty when there are none to send.
    replay: list[dict[str, Any]] = field(default_factory=list)
    # Every reasoning item of the reply, size-capped, for the record (audit only).
    reasoning_items: list[dict[str, Any]] = field(default_factory=list)
    # Set while this model's endpoint has refused reasoning carried across turns: why. The
    # sample's record and the run's summary say so (agent/model/responses_client.py).
    reasoning_not_carried: str | None = None

    def as_message(self) -> dict[str, Any]:
        """The assistant message in Chat Completions form, ready to append to history.

        It carries ``REPLAY_KEY`` when the reply has reasoning items to send back; use
        ``record_message`` for the copy a transcript keeps.
        """
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.tool_calls
            ]
        if self.replay:
            message[REPLAY_KEY] = self.replay
        return message


def record_message(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` as a transcript keeps it: without the full reasoning items (their capped
    copies are in ``reply_notes``), which may run to megabytes of encrypted text."""
    if REPLAY_KEY not in message:
        return message
    return {key: value for key, value in message.items() if key != REPLAY_KEY}


def reply_notes(response: ChatResponse) -> dict[str, Any]:
    """What a transcript keeps beside the message: a refusal, and how the reply broke shape."""
    notes: dict[str, Any] = {}
    if response.refusal:
        notes["refusal"] = response.refusal
    if response.deviations:
        notes["reply_deviations"] = list(response.deviations)
    if response.reasoning_items:
        notes["reasoning_items"] = list(response.reasoning_items)
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
