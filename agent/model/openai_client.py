"""ModelClient over the Chat Completions API of any OpenAI-compatible endpoint."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from openai.types.chat import ChatCompletion

from agent import tokens
from agent.config import ModelConfig
from agent.model.base import ChatResponse, ToolCall, Usage
from agent.model.endpoint import api_model_name, is_local_model
from agent.model.retry import RetryCallback, RetryPolicy
from agent.model.sdk_client import SdkClient

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
) -> Usage:
    """Provider-reported usage where present; tiktoken estimates (flagged) for what is missing.

    Reasoning tokens are part of the output count, as OpenAI reports them; the separate field
    says how many of them were reasoning.
    """
    estimated = False
    if prompt_tokens is None:
        prompt_tokens, estimated = estimate_input(), True
    if completion_tokens is None:
        completion_tokens, estimated = estimate_output(), True
    return Usage(
        input_tokens=int(prompt_tokens),
        output_tokens=int(completion_tokens),
        reasoning_tokens=int(reasoning_tokens or 0),
        estimated=estimated,
    )


class OpenAIChatClient(SdkClient):
    """One model behind a Chat Completions endpoint, with our retries and connection limit."""

    path = "/chat/completions"
    reply_type = ChatCompletion

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
    ) -> dict[str, Any]:
        request: dict[str, Any] = {"model": api_model_name(self.cfg.name), "messages": messages}
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
        # Provider-specific fields ride along verbatim (e.g. {"top_k": 20} for vLLM).
        request.update(self.cfg.extra_body)
        return request

    def _to_response(
        self,
        completion: Any,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        retries: int,
    ) -> ChatResponse:
        choice = completion.choices[0] if completion.choices else None
        message = choice.message if choice is not None else None
        content = message.content if message is not None else None
        # Reasoning text, where a compatible server returns it (vLLM, llama.cpp, DeepSeek).
        reasoning = getattr(message, "reasoning_content", None) or getattr(message, "reasoning", None)
        tool_calls = [
            ToolCall(id=call.id, name=call.function.name, arguments=call.function.arguments or "")
            for call in (message.tool_calls or [] if message is not None else [])
            if getattr(call, "function", None) is not None
        ]
        reported = completion.usage
        details = getattr(reported, "completion_tokens_details", None) if reported is not None else None
        usage = usage_from_counts(
            getattr(reported, "prompt_tokens", None),
            getattr(reported, "completion_tokens", None),
            getattr(details, "reasoning_tokens", None),
            estimate_input=lambda: tokens.estimate_prompt_tokens(messages, tools),
            estimate_output=lambda: tokens.estimate_output_tokens(
                content,
                ((c.name, c.arguments) for c in tool_calls),
                reasoning if isinstance(reasoning, str) else None,
            ),
        )
        return ChatResponse(
            content=content,
            tool_calls=tool_calls,
            usage=usage,
            finish_reason=choice.finish_reason if choice is not None else None,
            retries=retries,
            reasoning=reasoning if isinstance(reasoning, str) else None,
            raw=completion.model_dump(mode="json", exclude_none=True),
        )
