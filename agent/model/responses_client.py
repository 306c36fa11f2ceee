"""ModelClient over OpenAI's Responses API.

The loop speaks Chat Completions messages; this module translates them to Responses input
items (``function_call`` / ``function_call_output``), tools and tool_choice to their flat
Responses form, and the output items back to a ChatResponse.

Requests are stateless (the whole history is sent each turn, ``store: false``). A reasoning
model's reasoning items are carried to the next request encrypted, each in its original place
before the message or function call it preceded (``reasoning_items.py``): the assistant
message holds the reply's output layout under ``REPLAY_KEY``, which only this client reads.
"""

from __future__ import annotations

import json
import re
from contextvars import ContextVar
from typing import Any

from openai.types.responses import Response

from proctor.agent.model.base import REPLAY_KEY, ChatResponse, ModelError
from proctor.agent.model.endpoint import api_model_name
from proctor.agent.model.history import HistoryView
from proctor.agent.model.openai_client import reply_usage
from proctor.agent.model.provider_outcome import clean_text
from proctor.agent.model.reasoning_items import ENCRYPTED_REASONING, layout_of, replay_input
from proctor.agent.model.reply_shapes import (
    RawCall,
    as_list,
    count_or_none,
    field_of,
    json_type,
    normalize_calls,
    text_or_none,
)
from proctor.agent.model.sdk_client import SdkClient

# A 4xx naming the include or the reasoning items: the model or server may not take them. Only
# a request sent again without them that then succeeds proves it (``complete``).
_REFUSES_REASONING = re.compile(
    r"rejected the request \(HTTP 4\d\d\).*(encrypted|\binclude\b|reasoning)", re.I | re.S
)
# The request being built is the one asked again without reasoning: per task, so the samples
# running at the same time on this client keep theirs until the endpoint is shown to refuse.
_WITHOUT_REASONING: ContextVar[bool] = ContextVar("without_reasoning", default=False)
# What the record and the summary keep of the endpoint's refusal.
MAX_REASON_CHARS = 300


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) if isinstance(part, dict) else str(part) for part in content)
    return json.dumps(content, default=str)


def messages_to_input(messages: list[dict[str, Any]], *, with_reasoning: bool = True) -> list[dict[str, Any]]:
    """Chat Completions messages -> Responses input items (reasoning items where carried)."""
    items: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message.get("tool_call_id", ""),
                    "output": _text_of(message.get("content")),
                }
            )
            continue
        if role == "assistant":
            calls = [
                {
                    "type": "function_call",
                    "call_id": call.get("id", ""),
                    "name": call.get("function", {}).get("name", ""),
                    "arguments": call.get("function", {}).get("arguments", ""),
                }
                for call in message.get("tool_calls") or ()
            ]
            # The reply's reasoning items go back where they were, between text and calls.
            text = _text_of(message.get("content"))
            items.extend(replay_input(message.get(REPLAY_KEY), text, calls, with_reasoning=with_reasoning))
            continue
        # system / developer / user: the Responses API takes these roles as plain messages.
        items.append({"role": role, "content": message.get("content") or ""})
    return items


def tools_to_responses(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat tools ({"type": "function", "function": {...}}) -> flat Responses function tools."""
    converted: list[dict[str, Any]] = []
    for tool in tools:
        if tool.get("type") == "function" and "function" in tool:
            function = tool["function"]
            item: dict[str, Any] = {
                "type": "function",
                "name": function["name"],
                "parameters": function.get("parameters", {"type": "object", "properties": {}}),
                # Chat tools are non-strict unless they say so; keep the same contract.
                "strict": bool(function.get("strict", False)),
            }
            if function.get("description"):
                item["description"] = function["description"]
            converted.append(item)
        else:
            converted.append(tool)  # already in Responses form (or a built-in tool)
    return converted


def tool_choice_to_responses(choice: str | dict[str, Any]) -> str | dict[str, Any]:
    """ "auto"/"none"/"required" pass through; a named function is flattened."""
    if isinstance(choice, dict) and choice.get("type") == "function" and "function" in choice:
        return {"type": "function", "name": choice["function"]["name"]}
    return choice


class OpenAIResponsesClient(SdkClient):
    """One model behind the Responses API, with our retries and connection limit."""

    path = "/responses"
    reply_field = "output"
    reply_type = Response

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Ask for and send back reasoning until the endpoint refuses either. This client is this
        # model's alone (agent/run/clients.py), so a refusal changes no other model's protocol.
        self.carry_reasoning = True
        # Why this model's reasoning is no longer carried; None while it is.
        self.reasoning_not_carried: str | None = None
        # store: true in extra_body keeps responses server-side: items are then found by id.
        self.stored = self.cfg.extra_body.get("store") is True

    async def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        max_output_tokens: int | None = None,
    ) -> ChatResponse:
        kwargs: dict[str, Any] = {
            "tools": tools,
            "tool_choice": tool_choice,
            "max_output_tokens": max_output_tokens,
        }
        # Whether this call's request carries reasoning is read now: another sample of the same
        # model may switch the carry off while this request is in flight, and its refusal of the
        # reasoning it carried must still be answered by asking again without it.
        carried = self._carrying
        try:
            response = await super().complete(messages, **kwargs)
        except ModelError as exc:
            if not (carried and _REFUSES_REASONING.search(str(exc))):
                raise
            refusal = str(exc)
        else:
            response.reasoning_not_carried = self.reasoning_not_carried
            return response
        # Not a reasoning model (OpenAI refuses the include for those), a server without it,
        # or items it will not take back. Asked again without them: only if that is accepted
        # was the refusal about them (a 400 for another parameter that names "reasoning" must
        # not switch the carry off), and then this model carries none from now on, on record.
        marker = _WITHOUT_REASONING.set(True)
        try:
            response = await super().complete(messages, **kwargs)
        finally:
            _WITHOUT_REASONING.reset(marker)
        if self.carry_reasoning:
            self.carry_reasoning = False
            self.reasoning_not_carried = clean_text(
                f"the endpoint refused reasoning carried across turns: {refusal}", MAX_REASON_CHARS
            )
        response.deviations.append(
            f"the endpoint refused reasoning carried across turns ({refusal[:300]}); asked again "
            f"without include [{ENCRYPTED_REASONING}] or reasoning items, and carries none from now on"
        )
        response.reasoning_not_carried = self.reasoning_not_carried
        return response

    @property
    def _carrying(self) -> bool:
        return self.carry_reasoning and not _WITHOUT_REASONING.get()

    def _request(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        tool_choice: str | dict[str, Any] | None,
        max_output_tokens: int | None,
        view: HistoryView | None = None,
    ) -> dict[str, Any]:
        request: dict[str, Any] = {
            "model": api_model_name(self.cfg.name),
            "input": messages_to_input(messages, with_reasoning=self._carrying),
            # Stateless: the whole history goes with each request, so nothing needs keeping
            # server-side, and eval transcripts should not be retained by the provider.
            "store": False,
        }
        if tools:
            request["tools"] = tools_to_responses(tools)
        if tool_choice is not None:
            request["tool_choice"] = tool_choice_to_responses(tool_choice)
        if max_output_tokens is not None:
            request["max_output_tokens"] = max_output_tokens
        if self.cfg.reasoning_effort is not None:
            request["reasoning"] = {"effort": self.cfg.reasoning_effort}
        if self.cfg.temperature is not None:
            request["temperature"] = self.cfg.temperature
        if self.cfg.top_p is not None:
            request["top_p"] = self.cfg.top_p
        if self.cfg.seed is not None:
            request["seed"] = self.cfg.seed
        request.update(self.cfg.extra_body)
        include = request.get("include")
        wanted = self._carrying and not self.stored
        if wanted and (include is None or isinstance(include, list)):
            include = list(include or [])
            if ENCRYPTED_REASONING not in include:
                include.append(ENCRYPTED_REASONING)
            request["include"] = include
        return request

    def _to_response(
        self,
        response: Any,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        retries: int,
        view: HistoryView | None = None,
    ) -> ChatResponse:
        texts: list[str] = []
        summaries: list[str] = []
        raw_calls: list[RawCall] = []
        deviations: list[str] = []
        refusals: list[str] = []
        output = field_of(response, "output")
        if output is not None and not isinstance(output, list):
            deviations.append(f"output was {json_type(output)}, not a list; ignored")
        layout = layout_of(as_list(output), stored=self.stored)
        deviations.extend(layout.deviations)
        for item in as_list(output):
            kind = field_of(item, "type")
            if kind == "message":
                for part in as_list(field_of(item, "content")):
                    text = text_or_none(field_of(part, "text"))
                    if field_of(part, "type") == "output_text" and text is not None:
                        texts.append(text)
                    elif field_of(part, "type") == "refusal":
                        refusal = text_or_none(field_of(part, "refusal"))
                        if refusal is not None:
                            refusals.append(refusal)
            elif kind == "function_call":
                raw_calls.append(
                    RawCall(
                        id=field_of(item, "call_id"),
                        name=field_of(item, "name"),
                        arguments=field_of(item, "arguments"),
                    )
                )
            elif kind == "reasoning":
                for part in as_list(field_of(item, "summary")):
                    text = text_or_none(field_of(part, "text"))
                    if text:
                        summaries.append(text)
        tool_calls = normalize_calls(raw_calls)
        content = "".join(texts) if texts else None
        reasoning = "\n\n".join(summaries) if summaries else None

        reported = field_of(response, "usage")
        details = field_of(reported, "output_tokens_details")
        usage = reply_usage(
            (
                count_or_none(field_of(reported, "input_tokens")),
                count_or_none(field_of(reported, "output_tokens")),
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
        return ChatResponse(
            content=content,
            tool_calls=tool_calls,
            usage=usage,
            finish_reason=_finish_reason(response, bool(tool_calls)),
            retries=retries,
            reasoning=reasoning,
            refusal="\n".join(refusals) if refusals else None,
            deviations=deviations,
            replay=layout.replay,
            reasoning_items=layout.record,
        )


def _finish_reason(response: Any, has_tool_calls: bool) -> str:
    """The Chat Completions vocabulary, so the loop treats both APIs alike."""
    if has_tool_calls:
        return "tool_calls"
    if field_of(response, "status") == "incomplete":
        reason = field_of(field_of(response, "incomplete_details"), "reason")
        return "length" if reason == "max_output_tokens" else str(reason or "incomplete")[:200]
    return "stop"
