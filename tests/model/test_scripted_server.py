"""The scripted server itself: other suites rely on it behaving like an OpenAI endpoint."""

from __future__ import annotations

import httpx
import pytest
from openai import APIConnectionError, AsyncOpenAI, RateLimitError

from tests.support.scripted_server import Drop, HttpError, Reply, ReportedUsage, ScriptedServer, ToolCallSpec


async def test_replies_in_order_and_records_requests() -> None:
    script = [
        Reply(content="first", usage=ReportedUsage(7, 3, 2)),
        Reply(tool_calls=[ToolCallSpec("python", '{"code": "x', id="call_a")], usage=None),
    ]
    with ScriptedServer(script) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        first = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "q"}], tool_choice="none", max_tokens=9
        )
        second = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "q2"}])
        await client.close()
    assert first.choices[0].message.content == "first"
    assert first.usage is not None and first.usage.completion_tokens_details is not None
    assert first.usage.completion_tokens_details.reasoning_tokens == 2
    call = second.choices[0].message.tool_calls[0]  # type: ignore[index]
    assert call.function.arguments == '{"code": "x'  # type: ignore[union-attr]
    assert second.usage is None
    assert [r.json.get("tool_choice") for r in server.requests] == ["none", None]
    assert server.requests[0].json["max_tokens"] == 9
    assert server.requests[1].json["messages"][0]["content"] == "q2"


async def test_errors_drop_and_exhaustion() -> None:
    script = [HttpError(429, "busy", retry_after="3"), Drop()]
    with ScriptedServer(script) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        with pytest.raises(RateLimitError) as rate:
            await client.chat.completions.create(model="m", messages=[])
        assert rate.value.response.headers["retry-after"] == "3"
        with pytest.raises(APIConnectionError):
            await client.chat.completions.create(model="m", messages=[])
        # Past the end of the script: a clear 400, not a hang.
        async with httpx.AsyncClient() as raw:
            response = await raw.post(f"{server.base_url}/chat/completions", json={"model": "m"})
        await client.close()
    assert response.status_code == 400
    assert "script exhausted" in response.json()["error"]["message"]


async def test_callable_script_and_responses_format() -> None:
    def script(request: dict, index: int) -> Reply:
        return Reply(content=f"{index}:{request['model']}", tool_calls=[ToolCallSpec("f", "{}", id="c1")])

    with ScriptedServer(script) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        response = await client.responses.create(model="gm", input="hi")
        await client.close()
    assert response.output_text == "0:gm"
    assert [item.type for item in response.output] == ["message", "function_call"]
    assert server.requests[0].path.endswith("/v1/responses")


async def test_keep_last_bounds_the_record_but_counts_every_call() -> None:
    with ScriptedServer(lambda request, index: Reply(content=str(index)), keep_last=2) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        for turn in range(5):
            await client.chat.completions.create(model="m", messages=[{"role": "user", "content": str(turn)}])
        await client.close()
    assert server.call_count == 5
    assert [r.json["messages"][0]["content"] for r in server.requests] == ["3", "4"]
    assert [r.call_index for r in server.requests] == [3, 4]
