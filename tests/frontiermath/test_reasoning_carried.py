"""A reasoning model on the Responses API keeps its reasoning across FrontierMath turns.

Request N+1 holds every reasoning item the model returned so far, encrypted, each just before
the call it preceded; the token count is the provider's, re-sent items included; the record
keeps the items (capped) for audit, and a hostile item never stops the sample.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from proctor.agent.inputs.config import ModelConfig
from proctor.agent.model.base import REPLAY_KEY
from proctor.agent.model.factory import make_client
from proctor.agent.model.reasoning_items import ENCRYPTED_REASONING
from proctor.agent.results.records import Outcome, SampleRecord
from proctor.agent.tracks.frontiermath.track import FrontierMathTrack
from proctor.sandbox import Sandbox
from tests.frontiermath.support import RecordingEvents, context, integer_task, run_config
from tests.support.scripted_server import RawReply, Reply, ReportedUsage, ScriptedServer, Step, ToolCallSpec

RIGHT = "def answer():\n    return 6 * 7\n"
module_loop = pytest.mark.asyncio(loop_scope="module")


def python_call(code: str, call_id: str) -> ToolCallSpec:
    return ToolCallSpec("python", json.dumps({"code": code}), id=call_id)


async def run_sample(script: list[Step], sandbox: Sandbox) -> tuple[SampleRecord, ScriptedServer]:
    config = run_config()
    cfg = ModelConfig(name="openai/scripted-model", base_url="http://unused", api="responses", max_retries=0)
    with ScriptedServer(script) as server:
        client = make_client(cfg.model_copy(update={"base_url": server.base_url}))
        try:
            record = await FrontierMathTrack(config.track_options).run_sample(
                integer_task(), 0, context(client, sandbox, config, RecordingEvents())
            )
        finally:
            await client.aclose()
    return record, server


def reasoning_in(request: dict[str, Any]) -> list[tuple[str, str | None]]:
    """(encrypted content, id of the item after it) for each reasoning item sent."""
    items = request["input"]
    return [
        (item["encrypted_content"], items[i + 1].get("call_id"))
        for i, item in enumerate(items)
        if item.get("type") == "reasoning"
    ]


@module_loop
async def test_each_request_carries_every_reasoning_item_so_far(sandbox: Sandbox) -> None:
    script: list[Step] = [
        Reply(
            tool_calls=[python_call("print(6)", "call_1")],
            reasoning="Try six first.",
            encrypted_reasoning="enc-1",
            usage=ReportedUsage(1_000, 300, reasoning_tokens=250),
        ),
        Reply(
            content="And seven.",
            tool_calls=[python_call("print(7)", "call_2")],
            encrypted_reasoning="enc-2",
            usage=ReportedUsage(1_600, 200, reasoning_tokens=150),
        ),
        Reply(
            tool_calls=[ToolCallSpec("submit_answer", json.dumps({"code": RIGHT}), id="call_3")],
            encrypted_reasoning="enc-3",
            usage=ReportedUsage(2_100, 120, reasoning_tokens=90),
        ),
    ]
    record, server = await run_sample(script, sandbox)
    assert record.outcome is Outcome.CORRECT
    requests = [r.json for r in server.requests]
    assert all(r["include"] == [ENCRYPTED_REASONING] and r["store"] is False for r in requests)
    assert [reasoning_in(r) for r in requests] == [
        [],
        [("enc-1", "call_1")],
        [("enc-1", "call_1"), ("enc-2", None)],  # enc-2 preceded the reply's text
    ]
    third = requests[2]["input"]
    position = next(i for i, item in enumerate(third) if item.get("encrypted_content") == "enc-2")
    assert third[position + 1] == {"role": "assistant", "content": "And seven."}
    assert third[position + 2]["call_id"] == "call_2"
    # The provider's counts, as reported: its input counts include the re-sent items.
    assert [(t.input_tokens, t.output_tokens, t.reasoning_tokens) for t in record.turns] == [
        (1_000, 300, 250),
        (1_600, 200, 150),
        (2_100, 120, 90),
    ]
    assert record.total_tokens == 1_300 + 1_800 + 2_220 and record.reasoning_tokens == 490
    assert [t.cumulative_tokens for t in record.turns] == [1_300, 3_100, 5_320]
    assert not record.tokens_estimated
    # For audit: every item in the record, never the replay layout itself.
    assistant = [m for m in record.transcript if m["role"] == "assistant"]
    assert [m["reasoning_items"][0]["encrypted_content"] for m in assistant] == ["enc-1", "enc-2", "enc-3"]
    assert assistant[0]["reasoning"] == "Try six first."
    assert REPLAY_KEY not in record.model_dump_json()


@module_loop
async def test_a_hostile_reasoning_item_is_recorded_and_the_sample_goes_on(sandbox: Sandbox) -> None:
    huge = "Z" * 200_000
    output = [
        {"type": "reasoning", "id": None, "summary": "not a list", "encrypted_content": huge},
        {
            "type": "function_call",
            "call_id": "call_h",
            "name": "submit_answer",
            "arguments": json.dumps({"code": RIGHT}),
        },
    ]
    body = {
        "id": "resp_h",
        "object": "response",
        "created_at": 0,
        "model": "scripted-model",
        "status": "completed",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {"input_tokens": 900, "output_tokens": 40, "total_tokens": 940},
    }
    record, _ = await run_sample([RawReply(body)], sandbox)
    assert record.outcome is Outcome.CORRECT and record.total_tokens == 940
    (reply,) = [m for m in record.transcript if m["role"] == "assistant"]
    assert any("not sent back" in d for d in reply["reply_deviations"])
    (kept,) = reply["reasoning_items"]
    assert kept["encrypted_content"]["chars"] == len(huge) and len(json.dumps(kept)) < 2_000
    assert len(record.model_dump_json()) < 100_000
