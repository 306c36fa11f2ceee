"""Malformed replies through the real SDK: every deviation is answered, recorded, never raised.

Each case is a raw JSON reply a broken or hostile OpenAI-compatible server could send; the
client must hand back well-formed strings (ids unique, names and arguments strings), say
what deviated, and put a tool error on any call that cannot run.
"""

from __future__ import annotations

from typing import Any

import pytest

from proctor.agent.inputs.config import ModelConfig
from proctor.agent.model.base import ChatResponse
from proctor.agent.model.factory import make_client
from proctor.agent.model.retry import RetryPolicy
from proctor.agent.model.tokens import MAX_CHARS_PER_TOKEN
from proctor.agent.tracks.frontiermath.tools import MAX_ARGUMENT_CHARS, parse_tool_call
from tests.support.scripted_server import RawReply, ScriptedServer

QUESTION = [{"role": "user", "content": "go"}]


def chat_body(message: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "c1",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", **(message or {})}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }
    body.update(extra)
    return body


def call(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"id": "a", "type": "function", "function": {"name": "python", "arguments": "{}"}}
    base.update(fields)
    return base


async def ask(
    reply: RawReply, api: str = "chat", messages: list[dict[str, Any]] | None = None
) -> ChatResponse:
    with ScriptedServer([reply]) as server:
        config = ModelConfig(name="openai/m", base_url=server.base_url, api=api, max_retries=0)  # type: ignore[arg-type]
        client = make_client(config, retry_policy=RetryPolicy(max_retries=0))
        try:
            return await client.complete(messages or QUESTION)
        finally:
            await client.aclose()


def only_call(response: ChatResponse) -> Any:
    assert len(response.tool_calls) == 1
    tool_call = response.tool_calls[0]
    assert isinstance(tool_call.id, str) and tool_call.id
    assert isinstance(tool_call.name, str) and isinstance(tool_call.arguments, str)
    return tool_call


@pytest.mark.parametrize(
    ("raw_call", "deviation", "error"),
    [
        (call(function={"name": "python", "arguments": {"code": "print(1)"}}), "a JSON object", "malformed"),
        (call(function={"name": "python", "arguments": ["print(1)"]}), "a JSON array", "malformed"),
        (call(function={"name": "python", "arguments": 7}), "a JSON number", "malformed"),
        (call(function={"name": None, "arguments": "{}"}), "tool name is null", "malformed"),
        (call(function={"arguments": "{}"}), "tool name is null", "malformed"),
        (call(function={"name": "", "arguments": "{}"}), "tool name is empty", "malformed"),
        (call(function=None), "no 'function' field", "malformed"),
        ({"id": "a", "type": "function"}, "no 'function' field", "malformed"),
        (call(type="code_interpreter"), "not 'function'", "malformed"),
        (call(type=None), "not 'function'", "malformed"),
        (call(id=None), "no id (null)", None),
        ({"type": "function", "function": {"name": "python", "arguments": "{}"}}, "no id (null)", None),
        (call(id=12), "no id (a JSON number)", None),
        (call(id="x" * 5000), "id of 5,000 characters", None),
    ],
)
async def test_each_chat_tool_call_deviation_is_recorded_and_answered(
    raw_call: dict[str, Any], deviation: str, error: str | None
) -> None:
    response = await ask(RawReply(chat_body({"content": None, "tool_calls": [raw_call]})))
    tool_call = only_call(response)
    assert any(deviation in text for text in tool_call.deviations), tool_call.deviations
    parsed = parse_tool_call(tool_call)
    if error is None:
        assert tool_call.problem is None
        assert parsed.error is not None and "missing required argument 'code'" in parsed.error
    else:
        assert parsed.error is not None and error in parsed.error and parsed.error.startswith("Error:")
    # The history message that goes back to the API is well-formed.
    message = response.as_message()
    function = message["tool_calls"][0]["function"]
    assert isinstance(function["name"], str) and function["name"]
    assert isinstance(function["arguments"], str)


async def test_duplicate_and_missing_ids_become_unique_ids() -> None:
    calls = [call(id="same"), call(id="same"), call(id=None), call(id="same")]
    response = await ask(RawReply(chat_body({"tool_calls": calls})))
    ids = [c.id for c in response.tool_calls]
    assert ids[0] == "same" and len(set(ids)) == 4
    assert "duplicate id 'same'" in response.tool_calls[1].deviations[0]
    assert response.tool_calls[0].deviations == []


@pytest.mark.parametrize(
    ("body", "content", "deviation"),
    [
        (
            chat_body({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}, 3]}),
            "ab",
            "list",
        ),
        (chat_body({"content": {"x": 1}}), '{"x": 1}', "a JSON object"),
        (chat_body({"content": 5}), "5", "a JSON number"),
        (chat_body(choices=[]), None, "no choices"),
        ({"id": "c"}, None, "no choices"),
        (chat_body({"content": "x", "tool_calls": "python"}), "x", "tool_calls was a string"),
        (chat_body({"content": "x", "tool_calls": {"id": 1}}), "x", "tool_calls was a JSON object"),
    ],
)
async def test_chat_replies_of_any_shape_come_back_as_text(
    body: Any, content: str | None, deviation: str
) -> None:
    response = await ask(RawReply(body))
    assert response.content == content
    assert any(deviation in text for text in response.deviations), response.deviations


async def test_refusal_null_content_and_length_finish_are_kept() -> None:
    body = chat_body({"content": None, "refusal": "I can't help with that."})
    body["choices"][0]["finish_reason"] = "length"
    response = await ask(RawReply(body))
    assert response.content is None and response.refusal == "I can't help with that."
    assert response.finish_reason == "length"


@pytest.mark.parametrize(
    "usage",
    [
        {"prompt_tokens": "many", "completion_tokens": None},
        {"prompt_tokens": -5, "completion_tokens": 1.5},
        # Past float's range (and past 2**53, the largest count taken as reported).
        {"prompt_tokens": 10**400, "completion_tokens": 2**53 + 1},
        "lots",
        [1, 2],
    ],
)
async def test_nonsense_usage_is_estimated_not_raised_on(usage: Any) -> None:
    response = await ask(RawReply(chat_body({"content": "hello"}, usage=usage)))
    assert response.usage.estimated and response.usage.output_tokens >= 1


# 600,000 characters are at least 2,344 tokens in any tokenizer (MAX_CHARS_PER_TOKEN = 256).
LONG_TEXT = "ab " * 200_000


async def test_a_reply_reported_as_one_token_is_counted_as_the_text_it_carries() -> None:
    usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    big_prompt = [{"role": "user", "content": LONG_TEXT}]
    response = await ask(RawReply(chat_body({"content": LONG_TEXT}, usage=usage)), messages=big_prompt)
    floor = len(LONG_TEXT) // MAX_CHARS_PER_TOKEN
    assert response.usage.estimated
    assert response.usage.input_tokens >= floor and response.usage.output_tokens >= floor


async def test_an_under_reported_responses_api_reply_is_counted_as_its_text() -> None:
    body = responses_body(
        [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": LONG_TEXT}]}]
    )
    body["usage"] = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    response = await ask(RawReply(body), api="responses")
    assert response.usage.estimated and response.usage.output_tokens >= len(LONG_TEXT) // MAX_CHARS_PER_TOKEN


async def test_counts_a_tokenizer_could_give_are_kept_as_reported() -> None:
    # 600,000 characters reported as 3,000 tokens (200 characters a token): odd, but possible.
    usage = {"prompt_tokens": 3, "completion_tokens": 3000, "total_tokens": 3003}
    response = await ask(RawReply(chat_body({"content": LONG_TEXT}, usage=usage)))
    assert not response.usage.estimated
    assert (response.usage.input_tokens, response.usage.output_tokens) == (3, 3000)


async def test_lone_surrogates_and_nul_survive_the_client_verbatim() -> None:
    text = "a\ud800b\x00c\udfff"
    response = await ask(RawReply(chat_body({"content": text})))
    assert response.content == text


def responses_body(output: Any) -> dict[str, Any]:
    return {
        "id": "r",
        "object": "response",
        "created_at": 0,
        "model": "m",
        "status": "completed",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5},
    }


def function_call(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"type": "function_call", "call_id": "c", "name": "python", "arguments": "{}"}
    base.update(fields)
    return base


@pytest.mark.parametrize(
    ("item", "deviation"),
    [
        (function_call(arguments={"code": "1"}), "a JSON object"),
        (function_call(name=None), "tool name is null"),
        (function_call(call_id=None), "no id"),
        ({"type": "function_call"}, "no id"),
    ],
)
async def test_responses_function_call_deviations(item: dict[str, Any], deviation: str) -> None:
    response = await ask(RawReply(responses_body([item])), api="responses")
    tool_call = only_call(response)
    assert any(deviation in text for text in tool_call.deviations), tool_call.deviations


@pytest.mark.parametrize(
    "output",
    [
        "nope",
        [None, 3, {"type": "message", "content": [{"type": "output_text", "text": None}, {"type": "x"}]}],
        [{"type": "message", "content": "flat"}, {"type": "reasoning", "summary": [{"text": 5}]}],
    ],
)
async def test_responses_output_of_any_shape_does_not_raise(output: Any) -> None:
    response = await ask(RawReply(responses_body(output)), api="responses")
    assert response.content is None and response.tool_calls == []


async def test_responses_refusal_part_is_kept() -> None:
    item = {"type": "message", "content": [{"type": "refusal", "refusal": "no"}]}
    response = await ask(RawReply(responses_body([item])), api="responses")
    assert response.refusal == "no"


def test_huge_deep_and_bignum_arguments_are_tool_errors_not_exceptions() -> None:
    from proctor.agent.model.base import ToolCall

    huge = ToolCall("a", "python", '{"code": "' + "x" * (MAX_ARGUMENT_CHARS + 1) + '"}')
    assert "the limit is 1,000,000" in (parse_tool_call(huge).error or "")
    deep = ToolCall("a", "python", "[" * 100_000 + "]" * 100_000)
    assert "nested too deeply" in (parse_tool_call(deep).error or "")
    bignum = ToolCall("a", "python", '{"code": ' + "9" * 5000 + "}")
    assert "cannot be read" in (parse_tool_call(bignum).error or "")


async def test_a_ten_thousand_character_tool_name_is_not_echoed_back() -> None:
    response = await ask(
        RawReply(chat_body({"tool_calls": [call(function={"name": "n" * 10_000, "arguments": "{}"})]}))
    )
    tool_call = only_call(response)
    assert tool_call.name == "missing_name" and "10,000 characters" in (tool_call.problem or "")
    assert len(response.as_message()["tool_calls"][0]["function"]["name"]) < 100


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b'{"choices": [', "not valid JSON"),
        (b"\xff\xfe{}", "not valid JSON"),
        (b'{"choices": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
        (b'{"usage": {"prompt_tokens": ' + b"9" * 5000 + b"}}", r"cannot be read \(Exceeds the limit"),
    ],
    ids=["truncated", "not-utf8", "deep", "bignum"],
)
async def test_bodies_python_cannot_read_are_model_errors(raw: bytes, reason: str) -> None:
    from proctor.agent.model.base import ModelError

    with pytest.raises(ModelError, match=reason):
        await ask(RawReply(raw=raw))
