"""ModelClient over OpenAI's Responses API.

The loop speaks Chat Completions messages; this module translates them to Responses input
items (``function_call`` / ``function_call_output``), tools and tool_choice to their flat
Responses form, and the output items back to a ChatResponse.

Requests are stateless (the whole history is sent each turn). Reasoning items are not carried
across turns: the shared message format has no place for them, so the model re-reasons from
the visible transcript, as it does under Chat Completions.
"""

from __future__ import annotations

import json
from typing import Any

from openai.types.responses import Response

from agent import tokens
from agent.model.base import ChatResponse, ToolCall
from agent.model.endpoint import api_model_name
from agent.model.openai_client import usage_from_counts
from agent.model.sdk_client import SdkClient


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) if isinstance(part, dict) else str(part) for part in content)
    return json.dumps(content, default=str)


def messages_to_input(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat Completions messages -> Responses input items."""
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
            text = _text_of(message.get("content"))
            if text:
                items.append({"role": "assistant", "content": text})
            for call in message.get("tool_calls") or ():
                function = call.get("function", {})
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call.get("id", ""),
                        "name": function.get("name", ""),
                        "arguments": function.get("arguments", ""),
                    }
                )
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
    reply_type = Response

    def _request(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        tool_choice: str | dict[str, Any] | None,
        max_output_tokens: int | None,
    ) -> dict[str, Any]:
        request: dict[str, Any] = {
            "model": api_model_name(self.cfg.name),
            "input": messages_to_input(messages),
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
        request.update(self.cfg.extra_body)
        return request

    def _to_response(
        self, response: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, retries: int
    ) -> ChatResponse:
        texts: list[str] = []
        summaries: list[str] = []
        tool_calls: list[ToolCall] = []
        for item in response.output or []:
            kind = getattr(item, "type", None)
            if kind == "message":
                texts.extend(
                    part.text for part in item.content if getattr(part, "type", None) == "output_text"
                )
            elif kind == "function_call":
                tool_calls.append(ToolCall(id=item.call_id, name=item.name, arguments=item.arguments or ""))
            elif kind == "reasoning":
                summaries.extend(part.text for part in (item.summary or []) if getattr(part, "text", None))
        content = "".join(texts) if texts else None
        reasoning = "\n\n".join(summaries) if summaries else None

        reported = response.usage
        details = getattr(reported, "output_tokens_details", None) if reported is not None else None
        usage = usage_from_counts(
            getattr(reported, "input_tokens", None),
            getattr(reported, "output_tokens", None),
            getattr(details, "reasoning_tokens", None),
            estimate_input=lambda: tokens.estimate_prompt_tokens(messages, tools),
            estimate_output=lambda: tokens.estimate_output_tokens(
                content, ((c.name, c.arguments) for c in tool_calls), reasoning
            ),
        )
        return ChatResponse(
            content=content,
            tool_calls=tool_calls,
            usage=usage,
            finish_reason=_finish_reason(response, bool(tool_calls)),
            retries=retries,
            reasoning=reasoning,
            raw=response.model_dump(mode="json", exclude_none=True),
        )


def _finish_reason(response: Any, has_tool_calls: bool) -> str:
    """The Chat Completions vocabulary, so the loop treats both APIs alike."""
    if has_tool_calls:
        return "tool_calls"
    if getattr(response, "status", None) == "incomplete":
        details = getattr(response, "incomplete_details", None)
        reason = getattr(details, "reason", None)
        return "length" if reason == "max_output_tokens" else str(reason or "incomplete")
    return "stop"
