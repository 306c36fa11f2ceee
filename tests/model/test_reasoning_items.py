"""Responses API reasoning items go back on the next request as returned, and never break a run.

Against the scripted server, which checks returned items the way OpenAI does (encrypted
content required with ``store: false`` and matching what it issued; a following item).
"""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from proctor.agent.inputs.config import ModelConfig
from proctor.agent.model.base import (
    REPLAY_KEY,
    ChatResponse,
    ModelClient,
    ModelError,
    record_message,
    reply_notes,
)
from proctor.agent.model.factory import make_client
from proctor.agent.model.reasoning_items import (
    ENCRYPTED_REASONING,
    MAX_RECORD_ITEM_CHARS,
    MAX_REPLAY_ITEM_CHARS,
    MAX_REPLAY_ITEMS,
)
from proctor.agent.model.retry import RetryPolicy
from tests.support.scripted_server import (
    HttpError,
    RawReply,
    Reply,
    ReportedUsage,
    ScriptedServer,
    ToolCallSpec,
)

FAST = RetryPolicy(max_retries=0, base_delay_s=0.001, max_delay_s=0.01)
QUESTION = [{"role": "user", "content": "What is 6 * 7?"}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "python",
            "parameters": {"type": "object", "properties": {"code": {"type": "string"}}},
        },
    }
]


def client_for(server: ScriptedServer, api: str = "responses", **cfg: Any) -> ModelClient:
    config = ModelConfig(name="openai/reasoner", base_url=server.base_url, api=api, **cfg)  # type: ignore[arg-type]
    return make_client(config, retry_policy=FAST)


def tool_result(response: ChatResponse, output: str = "42") -> list[dict[str, Any]]:
    return [{"role": "tool", "tool_call_id": c.id, "content": output} for c in response.tool_calls]


def responses_body(output: Any, usage: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "id": "resp_raw",
        "object": "response",
        "created_at": 0,
        "model": "reasoner",
        "status": "completed",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": usage or {"input_tokens": 30, "output_tokens": 20, "total_tokens": 50},
    }


def reasoning(item_id: str, encrypted: Any = "gAAAA-opaque", **fields: Any) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "reasoning", "id": item_id, "summary": [], **fields}
    if encrypted is not None:
        item["encrypted_content"] = encrypted
    return item


def call(call_id: str, code: str = "print(42)") -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": "python",
        "arguments": json.dumps({"code": code}),
        "status": "completed",
    }


def issued_by(step: Any) -> dict[str, str]:
    """The reasoning items a raw reply issues, as the server must know them to accept them back."""
    output = step.body.get("output") if isinstance(step, RawReply) and isinstance(step.body, dict) else None
    return {
        item["id"]: item["encrypted_content"]
        for item in (output if isinstance(output, list) else [])
        if isinstance(item, dict)
        and isinstance(item.get("id"), str)
        and isinstance(item.get("encrypted_content"), str)
    }


async def two_turns(first: Any, api: str = "responses", **cfg: Any) -> tuple[ChatResponse, ScriptedServer]:
    """Ask, answer the reply's tool calls, ask again; returns the first reply and the server."""
    with ScriptedServer([first, Reply(content="done")]) as server:
        server.issued_reasoning.update(issued_by(first))
        client = client_for(server, api=api, **cfg)
        try:
            response = await client.complete(QUESTION, tools=TOOLS)
            history = [*QUESTION, response.as_message(), *tool_result(response)]
            await client.complete(history, tools=TOOLS)
        finally:
            await client.aclose()
    return response, server


async def test_reasoning_items_go_back_encrypted_before_their_call() -> None:
    first = Reply(
        tool_calls=[ToolCallSpec("python", '{"code": "print(6*7)"}', id="call_a")],
        reasoning="Multiply.",
        encrypted_reasoning="gAAAAB-secret-1",
        usage=ReportedUsage(100, 60, reasoning_tokens=48),
    )
    response, server = await two_turns(first)
    requests = [r.json for r in server.requests]
    assert all(r["include"] == [ENCRYPTED_REASONING] and r["store"] is False for r in requests)
    (issued,) = server.issued_reasoning
    assert requests[1]["input"][1:] == [
        {
            "type": "reasoning",
            "id": issued,
            "summary": [{"type": "summary_text", "text": "Multiply."}],
            "encrypted_content": "gAAAAB-secret-1",
        },
        {
            "type": "function_call",
            "call_id": "call_a",
            "name": "python",
            "arguments": '{"code": "print(6*7)"}',
        },
        {"type": "function_call_output", "call_id": "call_a", "output": "42"},
    ]
    # Reported usage as is: reasoning is part of the output count.
    usage = response.usage
    assert (usage.input_tokens, usage.output_tokens, usage.reasoning_tokens, usage.estimated) == (
        100,
        60,
        48,
        False,
    )
    # The record keeps the item (capped) and not the replay layout.
    assert reply_notes(response)["reasoning_items"][0]["encrypted_content"] == "gAAAAB-secret-1"
    assert REPLAY_KEY in response.as_message() and REPLAY_KEY not in record_message(response.as_message())


async def test_the_original_order_of_reasoning_text_and_calls_is_kept() -> None:
    output = [
        reasoning("rs_1", "enc-1"),
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Two runs."}]},
        call("call_1"),
        reasoning("rs_2", "enc-2", summary=[{"type": "summary_text", "text": "and a check"}]),
        call("call_2", "print(1)"),
    ]
    response, server = await two_turns(RawReply(responses_body(output)))
    assert response.content == "Two runs." and [c.id for c in response.tool_calls] == ["call_1", "call_2"]
    sent = server.requests[1].json["input"][1:]
    assert [item.get("id") or item.get("call_id") or item.get("role") for item in sent] == [
        "rs_1",
        "assistant",
        "call_1",
        "rs_2",
        "call_2",
        "call_1",
        "call_2",
    ]
    assert sent[3] == reasoning("rs_2", "enc-2", summary=[{"type": "summary_text", "text": "and a check"}])


def hostile_items() -> list[tuple[str, Any, str]]:
    return [
        ("no id", {"type": "reasoning", "summary": [], "encrypted_content": "e"}, "id is null"),
        ("numeric id", reasoning(7), "id is a JSON number"),  # type: ignore[arg-type]
        ("summary not a list", reasoning("rs_s", summary="think"), "summary is a string"),
        ("summary part not an object", reasoning("rs_p", summary=["x"]), "summary part"),
        ("encrypted content not a string", reasoning("rs_e", {"k": 1}), "encrypted_content is a JSON object"),
        ("content not a list", reasoning("rs_c", content="plain"), "content is not a list"),
        ("no encrypted content", reasoning("rs_n", None), "no encrypted_content"),
        ("id of a megabyte", reasoning("r" * 1_000_000), "id is 1,000,000 characters"),
        ("huge encrypted content", reasoning("rs_h", "A" * (MAX_REPLAY_ITEM_CHARS + 1)), "JSON characters"),
        (
            "deep nesting",
            reasoning("rs_d", summary=[{"text": "t", "x": json.loads("[" * 500 + "]" * 500)}]),
            "",
        ),
    ]


@pytest.mark.parametrize(
    ("item", "expected"), [(i, e) for _, i, e in hostile_items()], ids=[n for n, _, _ in hostile_items()]
)
async def test_a_malformed_or_huge_item_is_recorded_and_not_sent_back(item: Any, expected: str) -> None:
    body = responses_body([item, call("call_x")])
    response, server = await two_turns(RawReply(body))
    # The reply is used as usual and the next request is one the API accepts.
    assert [c.id for c in response.tool_calls] == ["call_x"]
    assert server.call_count == 2 and "error" not in server.requests[1].json
    sent = server.requests[1].json["input"]
    if expected:
        assert not any(isinstance(i, dict) and i.get("type") == "reasoning" for i in sent)
        assert any("not sent back" in d and expected in d for d in response.deviations), response.deviations
    # The record keeps a copy, however large the item was.
    (kept,) = reply_notes(response)["reasoning_items"]
    assert len(json.dumps(kept)) <= MAX_RECORD_ITEM_CHARS + 200


async def test_thousands_of_items_are_bounded_and_odd_output_never_raises() -> None:
    many = [reasoning(f"rs_{i}", f"enc-{i}") for i in range(MAX_REPLAY_ITEMS + 10)]
    odd = [None, 3, "text", {"type": "reasoning"}, {"type": "reasoning", "summary": None, "id": "rs_z"}]
    response, server = await two_turns(RawReply(responses_body([*many, *odd, call("call_m")])))
    sent = [i for i in server.requests[1].json["input"] if i.get("type") == "reasoning"]
    assert [i["id"] for i in sent] == [f"rs_{i}" for i in range(MAX_REPLAY_ITEMS)]
    assert any(f"more than {MAX_REPLAY_ITEMS} reasoning items" in d for d in response.deviations)
    assert len(reply_notes(response)["reasoning_items"]) == len(many) + 2


async def test_an_endpoint_that_refuses_the_include_is_asked_again_without_it() -> None:
    refused = HttpError(
        400, "Encrypted content is not supported with this model.", type="invalid_request_error"
    )
    later = Reply(tool_calls=[ToolCallSpec("python", "{}", id="c1")], reasoning="r")
    with ScriptedServer([refused, later, Reply(content="ok")]) as server:
        client = client_for(server)
        try:
            response = await client.complete(QUESTION, tools=TOOLS)
            history = [*QUESTION, response.as_message(), *tool_result(response)]
            await client.complete(history, tools=TOOLS)
        finally:
            await client.aclose()
    assert ["include" in r.json for r in server.requests] == [True, False, False]
    assert any("refused reasoning carried" in d for d in response.deviations)
    # Items a later reply returned are not sent either: without the include they cannot be.
    assert not any(i.get("type") == "reasoning" for i in server.requests[2].json["input"])


async def test_an_endpoint_that_refuses_its_items_back_is_asked_again_without_them() -> None:
    first = Reply(tool_calls=[ToolCallSpec("python", "{}", id="c1")], encrypted_reasoning="enc-1")
    refused = HttpError(400, "The encrypted content for item rs_1 could not be verified.")
    with ScriptedServer([first, refused, Reply(content="fine"), Reply(content="again")]) as server:
        client = client_for(server)
        try:
            response = await client.complete(QUESTION, tools=TOOLS)
            history = [*QUESTION, response.as_message(), *tool_result(response)]
            second = await client.complete(history, tools=TOOLS)
            await client.complete([*history, second.as_message(), {"role": "user", "content": "more"}])
        finally:
            await client.aclose()
    carried = [[i["id"] for i in r.json["input"] if i.get("type") == "reasoning"] for r in server.requests]
    assert carried == [[], ["rs_1"], [], []] and second.content == "fine"
    assert ["include" in r.json for r in server.requests] == [True, True, False, False]
    assert any("refused reasoning carried" in d for d in second.deviations)


async def test_a_refusal_naming_reasoning_that_is_not_about_it_leaves_the_carry_on() -> None:
    """A 400 for another parameter whose text says "reasoning" (here reasoning.effort) is refused
    again without the include: it was not about carrying, so carrying stays on and nothing is
    recorded as not carried."""
    effort = HttpError(400, "Unsupported value: 'reasoning.effort' does not support 'max'.")
    with ScriptedServer([effort, effort, Reply(content="ok")]) as server:
        client = client_for(server)
        try:
            with pytest.raises(ModelError):
                await client.complete(QUESTION, tools=TOOLS)
            response = await client.complete(QUESTION, tools=TOOLS)
        finally:
            await client.aclose()
    assert ["include" in r.json for r in server.requests] == [True, False, True]
    assert response.reasoning_not_carried is None


async def test_every_reply_after_a_switch_off_says_why_reasoning_is_not_carried() -> None:
    refused = HttpError(400, "Encrypted content is not supported with this model.")
    with ScriptedServer([refused, Reply(content="one"), Reply(content="two")]) as server:
        client = client_for(server)
        try:
            first = await client.complete(QUESTION)
            second = await client.complete(QUESTION)
        finally:
            await client.aclose()
    for response in (first, second):
        assert response.reasoning_not_carried is not None
        assert "Encrypted content is not supported" in response.reasoning_not_carried
    assert ["include" in r.json for r in server.requests] == [True, False, False]


async def test_two_samples_in_flight_when_the_carry_is_refused_both_get_their_answer() -> None:
    """Two samples of one model send requests carrying reasoning at once; the endpoint refuses both.
    The first refusal switches the carry off; the second request carried reasoning too, so its
    refusal, seen only after the switch, is answered the same way (asked again without it), not a
    model error. The server holds the second refusal until the client has switched, so the order
    is the same every run."""
    import asyncio
    import threading
    import time

    both_in = threading.Barrier(2, timeout=30)
    carried_requests: list[int] = []
    client: Any = None

    def refuse_carried(request: dict[str, Any], index: int) -> Any:
        if "include" not in request:
            return Reply(content="answer")
        carried_requests.append(index)
        both_in.wait()
        if index != min(carried_requests):
            deadline = time.monotonic() + 30
            while client.carry_reasoning and time.monotonic() < deadline:
                time.sleep(0.01)
        return HttpError(400, "Encrypted content is not supported with this model.")

    with ScriptedServer(refuse_carried) as server:
        client = client_for(server)
        try:
            first, second = await asyncio.gather(client.complete(QUESTION), client.complete(QUESTION))
        finally:
            await client.aclose()
    assert first.content == second.content == "answer"
    assert first.reasoning_not_carried is not None and second.reasoning_not_carried is not None
    assert sorted("include" in r.json for r in server.requests) == [False, False, True, True]


async def test_a_client_of_another_model_keeps_carrying_when_one_is_refused() -> None:
    """Clients are per model (agent/run/clients.py): one endpoint's refusal changes no other's."""
    refused = HttpError(400, "Encrypted content is not supported with this model.")
    with (
        ScriptedServer([refused, Reply(content="one")]) as refusing,
        ScriptedServer([Reply(content="a"), Reply(content="b")]) as carrying,
    ):
        refuser, carrier = client_for(refusing), client_for(carrying)
        try:
            await refuser.complete(QUESTION)
            await carrier.complete(QUESTION)
            other = await carrier.complete(QUESTION)
        finally:
            await refuser.aclose()
            await carrier.aclose()
    assert other.reasoning_not_carried is None
    assert ["include" in r.json for r in carrying.requests] == [True, True]


async def test_only_the_fields_the_api_takes_back_are_sent() -> None:
    summary = [{"type": "summary_text", "text": "t", "annotations": [{"deep": [[[]]]}]}]
    item = reasoning("rs_f", "enc-f", summary=summary, status="completed", extra_field={"x": 1})
    _, server = await two_turns(RawReply(responses_body([item, call("c_f")])))
    (sent,) = [i for i in server.requests[1].json["input"] if i.get("type") == "reasoning"]
    assert sent == {
        "type": "reasoning",
        "id": "rs_f",
        "summary": [{"type": "summary_text", "text": "t"}],
        "encrypted_content": "enc-f",
        "status": "completed",
    }


async def test_any_other_bad_request_is_not_retried() -> None:
    with ScriptedServer([HttpError(400, "Unknown model 'reasoner'")]) as server:
        client = client_for(server)
        with pytest.raises(Exception, match="Unknown model"):
            await client.complete(QUESTION)
        await client.aclose()
    assert server.call_count == 1


async def test_stored_responses_send_items_back_by_id_without_asking_for_encryption() -> None:
    first = Reply(tool_calls=[ToolCallSpec("python", "{}", id="c1")], reasoning="kept server-side")
    response, server = await two_turns(first, extra_body={"store": True})
    assert all(r.json["store"] is True and "include" not in r.json for r in server.requests)
    (item,) = [i for i in server.requests[1].json["input"] if i.get("type") == "reasoning"]
    assert item["summary"] == [{"type": "summary_text", "text": "kept server-side"}]
    assert "encrypted_content" not in item and not response.deviations


async def test_a_user_include_list_is_kept_and_extended() -> None:
    _, server = await two_turns(Reply(content="hi"), extra_body={"include": ["message.output_text.logprobs"]})
    assert server.requests[0].json["include"] == ["message.output_text.logprobs", ENCRYPTED_REASONING]


async def test_the_scripted_server_refuses_what_openai_refuses() -> None:
    """The checks the tests above rely on: an item without its encrypted content, with
    altered content, or last in the input is refused; the same item, intact, is accepted."""
    cases = [
        [*QUESTION, reasoning("rs_1", None), call("c")],
        [*QUESTION, reasoning("rs_1", "forged"), call("c")],
        [*QUESTION, reasoning("rs_1", "enc")],
    ]
    intact = [*QUESTION, reasoning("rs_1", "enc"), call("c")]
    with ScriptedServer([Reply(content="x")] * 4) as server:
        server.issued_reasoning["rs_1"] = "enc"
        sdk = openai.AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        try:
            for case in cases:
                with pytest.raises(openai.BadRequestError):
                    await sdk.post("/responses", cast_to=dict, body={"model": "m", "input": case})
            await sdk.post("/responses", cast_to=dict, body={"model": "m", "input": intact})
        finally:
            await sdk.close()


async def test_chat_completions_reasoning_is_recorded_and_never_sent_back() -> None:
    body = {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "reasoning_content": "Let me think about 6 * 7.",
                    "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "python", "arguments": "{}"}}
                    ],
                },
            }
        ],
    }
    response, server = await two_turns(RawReply(body), api="chat")
    assert response.reasoning == "Let me think about 6 * 7."
    sent = server.requests[1].json["messages"]
    assert sent[1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "python", "arguments": "{}"}}],
    }
    assert "reasoning" not in json.dumps(sent)
