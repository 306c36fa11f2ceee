"""ModelClient over the Chat Completions API of any OpenAI-compatible endpoint."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from proctor.agent.inputs.config import ModelConfig
from proctor.agent.model import history, tokens
from proctor.agent.model.base import ChatResponse, ToolCall, Usage
from proctor.agent.model.endpoint import api_model_name, is_local_model
from proctor.agent.model.reply_shapes import (
    RawCall,
    as_list,
    content_text,
    count_or_none,
    field_of,
    json_type,
    normalize_calls,
    text_or_none,
)
from proctor.agent.model.retry import RetryCallback, RetryPolicy
from proctor.agent.model.sdk_client import JsonReply, SdkClient
from proctor.agent.model.usage import normalize_usage

# OpenAI wants max_completion_tokens (max_tokens is refused by reasoning models); llama.cpp's
# server and some older compatible servers only know max_tokens.
MaxTokensField = Literal["max_completion_tokens", "max_tokens"]


def usage_from_counts(
    prompt_tokens: int | None,
    completion_tokens: int | None,
    reasoning_tokens: int | None,
    *,
    estimate_input: Callable[[], int],
    estimate_output: Callable[[], int],
    floor_input: Callable[[], int] = lambda: 0,
    floor_output: Callable[[], int] = lambda: 0,
    total_tokens: int | None = None,
) -> Usage:
    """Provider-reported usage where present; tiktoken estimates (flagged) for what is missing.

    A reported count below the floor of the text it covers
    (``proctor.agent.model.tokens.MAX_CHARS_PER_TOKEN``) is not believed: the text's estimate
    takes its place, flagged like any estimate, so an under-reporting server cannot carry a
    conversation past the token cap. The believed counts and the reported total are then read
    by one rule for every provider's shape (agent/model/usage.py): reasoning tokens reported
    outside the completion are added to the output, and a larger total is what counts.
    """
    estimated = False
    if prompt_tokens is None or prompt_tokens < floor_input():
        prompt_tokens, estimated = estimate_input(), True
    if completion_tokens is None or completion_tokens < floor_output():
        completion_tokens, estimated = estimate_output(), True
    normalized = normalize_usage(
        int(prompt_tokens),
        int(completion_tokens),
        int(reasoning_tokens or 0),
        total_tokens,
        estimated=estimated,
    )
    return Usage(
        input_tokens=normalized.input_tokens,
        output_tokens=normalized.output_tokens,
        reasoning_tokens=normalized.reasoning_tokens,
        estimated=estimated,
        counted=normalized.counted,
        shape=normalized.shape.value,
    )


def reply_usage(
    reported: tuple[int | None, int | None, int | None, int | None],
    *,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    content: str | None,
    tool_calls: list[ToolCall],
    reasoning: str | None,
    view: history.HistoryView | None = None,
) -> Usage:
    """:func:`usage_from_counts` for one reply: ``reported`` is (input, output, reasoning, total)
    as the provider sent them (None where not a sane count); estimates and floors come from the request
    (``view``: its history as sent, when it had one) and the reply's own text."""
    calls = [(call.name, call.arguments) for call in tool_calls]
    prompt_count, completion_count, reasoning_count, total_count = reported
    return usage_from_counts(
        prompt_count,
        completion_count,
        reasoning_count,
        total_tokens=total_count,
        estimate_input=lambda: tokens.estimate_prompt_tokens(messages, tools),
        estimate_output=lambda: tokens.estimate_output_tokens(content, calls, reasoning),
        # Incremental for a conversation's history: the walk over it grew with every turn.
        floor_input=lambda: history.prompt_tokens_floor(messages, view),
        floor_output=lambda: tokens.output_tokens_floor(content, calls, reasoning),
    )


class OpenAIChatClient(SdkClient):
    """One model behind a Chat Completions endpoint, with our retries and connection limit."""

    path = "/chat/completions"
    reply_field = "choices"
    # Read as plain JSON (see JsonReply): every field is read through reply_shapes' checks.
    reply_type = JsonReply

    def __init__(
        self,
        cfg: ModelConfig,
        *,
        base_url_override: str | None = None,
        on_retry: RetryCallback | None = None,
        retry_policy: RetryPolicy | None = None,
        max_tokens_field: MaxTokensField | None = None,
    ) -> None:
        super().__init__(
            cfg, base_url_override=base_url_override, on_retry=on_retry, retry_policy=retry_policy
        )
        self.max_tokens_field: MaxTokensField = max_tokens_field or (
            "max_tokens" if is_local_model(cfg.name) else "max_completion_tokens"
        )

    def _request(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        tool_choice: str | dict[str, Any] | None,
        max_output_tokens: int | None,
        view: history.HistoryView | None = None,
    ) -> dict[str, Any]:
        # Chat Completions has no field for Responses reasoning items: a message never carries
        # them here (a history is one API's), and if one did they would stay behind.
        sent = history.sent_messages(messages, view)
        request: dict[str, Any] = {"model": api_model_name(self.cfg.name), "messages": sent}
        if tools:
            request["tools"] = tools
        if tool_choice is not None:
            request["tool_choice"] = tool_choice
        if max_output_tokens is not None:
            request[self.max_tokens_field] = max_output_tokens
        if self.cfg.reasoning_effort is not None:
            request["reasoning_effort"] = self.cfg.reasoning_effort
        if self.cfg.temperature is not None:
            request["temperature"] = self.cfg.temperature
        if self.cfg.top_p is not None:
            request["top_p"] = self.cfg.top_p
        if self.cfg.seed is not None:
            request["seed"] = self.cfg.seed
        # Provider-specific fields ride along verbatim (e.g. {"top_k": 20} for vLLM).
        request.update(self.cfg.extra_body)
        return request

    def _encoded(self, request: dict[str, Any], view: history.HistoryView | None) -> bytes | None:
        # A conversation's history encodes only its new messages; the rest of the request is
        # small. Keys other than strings (from extra_body) are left to the SDK's encoder.
        if view is None or "messages" in self.cfg.extra_body:
            return None
        parts = []
        for key, value in request.items():
            if not isinstance(key, str):
                return None
            encoded = view.encoded() if key == "messages" else history.dumps(value)
            parts.append(history.dumps(key) + b":" + encoded)
        return b"{" + b",".join(parts) + b"}"

    def _to_response(
        self,
        completion: Any,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        retries: int,
        view: history.HistoryView | None = None,
    ) -> ChatResponse:
        deviations: list[str] = []
        choices = as_list(field_of(completion, "choices"))
        if not choices:
            deviations.append("the reply has no choices")
        choice = choices[0] if choices else None
        message = field_of(choice, "message")
        content, content_deviation = content_text(field_of(message, "content"))
        if content_deviation:
            deviations.append(content_deviation)
        # Reasoning text, where a compatible server returns it (vLLM, llama.cpp, DeepSeek).
        reasoning = text_or_none(field_of(message, "reasoning_content")) or text_or_none(
            field_of(message, "reasoning")
        )
        raw_calls = field_of(message, "tool_calls")
        if raw_calls is not None and not isinstance(raw_calls, list):
            deviations.append(f"tool_calls was {json_type(raw_calls)}, not a list; ignored")
        tool_calls = normalize_calls(_raw_chat_call(call) for call in as_list(raw_calls))
        reported = field_of(completion, "usage")
        details = field_of(reported, "completion_tokens_details")
        usage = reply_usage(
            (
                count_or_none(field_of(reported, "prompt_tokens")),
                count_or_none(field_of(reported, "completion_tokens")),
                count_or_none(field_of(details, "reasoning_tokens")),
                count_or_none(field_of(reported, "total_tokens")),
            ),
            messages=messages,
            tools=tools,
            content=content,
            tool_calls=tool_calls,
            reasoning=reasoning,
            view=view,
        )
        finish_reason = field_of(choice, "finish_reason")
        return ChatResponse(
            content=content,
            tool_calls=tool_calls,
            usage=usage,
            finish_reason=None if finish_reason is None else str(finish_reason)[:200],
            retries=retries,
            reasoning=reasoning,
            refusal=text_or_none(field_of(message, "refusal")),
            deviations=deviations,
        )


def _raw_chat_call(call: Any) -> RawCall:
    function = field_of(call, "function")
    return RawCall(
        id=field_of(call, "id"),
        name=field_of(function, "name"),
        arguments=field_of(function, "arguments"),
        type=field_of(call, "type"),
        has_function=function is not None,
    )
