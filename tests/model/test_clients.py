"""Model clients through the real openai SDK against the scripted server."""

from __future__ import annotations

import asyncio
import ssl
import time
from typing import Any

import pytest

from proctor.agent.errors import UserError
from proctor.agent.inputs.config import ModelConfig
from proctor.agent.model import endpoint as endpoint_module
from proctor.agent.model import tokens
from proctor.agent.model.base import ModelClient, ModelError
from proctor.agent.model.endpoint import Endpoint, api_model_name
from proctor.agent.model.factory import make_client
from proctor.agent.model.openai_client import OpenAIChatClient
from proctor.agent.model.responses_client import OpenAIResponsesClient
from proctor.agent.model.retry import RetryPolicy, parse_retry_after
from tests.support.scripted_server import Drop, HttpError, Reply, ReportedUsage, ScriptedServer, ToolCallSpec

FAST = RetryPolicy(max_retries=4, base_delay_s=0.001, max_delay_s=0.01)
QUESTION = [{"role": "user", "content": "What is 6 * 7?"}]
PYTHON_TOOL = {
    "type": "function",
    "function": {
        "name": "python",
        "description": "Run Python code",
        "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
    },
}


def _client(
    server: ScriptedServer, *, name: str = "openai/test-model", policy: RetryPolicy = FAST, **cfg: Any
) -> tuple[ModelClient, list[str]]:
    reasons: list[str] = []
    config = ModelConfig(name=name, base_url=server.base_url, **cfg)
    return make_client(config, on_retry=reasons.append, retry_policy=policy), reasons


async def test_plain_reply_with_reported_usage() -> None:
    with ScriptedServer([Reply(content="42", usage=ReportedUsage(120, 7))]) as server:
        client, reasons = _client(server)
        response = await client.complete(QUESTION)
        await client.aclose()
    assert response.content == "42"
    assert response.tool_calls == []
    assert response.finish_reason == "stop"
    assert (response.usage.input_tokens, response.usage.output_tokens, response.usage.estimated) == (
        120,
        7,
        False,
    )
    assert response.retries == 0 and reasons == []
    body = server.requests[0].json
    assert body["model"] == "test-model"  # provider prefix stripped
    assert body["messages"] == QUESTION
    assert "tools" not in body and "tool_choice" not in body


async def test_malformed_tool_arguments_reach_the_caller_verbatim() -> None:
    raw = '{ "code": "python math.round(x)\n}\n\n'
    forced = {"type": "function", "function": {"name": "python"}}
    with ScriptedServer([Reply(tool_calls=[ToolCallSpec("python", raw, id="call_7")])]) as server:
        client, _ = _client(server)
        response = await client.complete(QUESTION, tools=[PYTHON_TOOL], tool_choice=forced)
        await client.aclose()
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [("call_7", "python", raw)]
    assert response.finish_reason == "tool_calls"
    assert response.as_message()["tool_calls"][0]["function"]["arguments"] == raw
    body = server.requests[0].json
    assert body["tools"] == [PYTHON_TOOL]
    assert body["tool_choice"] == forced


async def test_reasoning_tokens_effort_and_output_cap() -> None:
    with ScriptedServer([Reply(content="ok", usage=ReportedUsage(50, 900, reasoning_tokens=850))]) as server:
        client, _ = _client(server, reasoning_effort="high", temperature=0.2, extra_body={"top_k": 20})
        response = await client.complete(QUESTION, max_output_tokens=1000)
        await client.aclose()
    assert response.usage.reasoning_tokens == 850
    # OpenAI counts reasoning inside completion tokens; the budget must see all of it.
    assert response.usage.total == 950
    body = server.requests[0].json
    assert body["reasoning_effort"] == "high"
    assert (body["temperature"], body["top_k"]) == (0.2, 20)
    assert body["max_completion_tokens"] == 1000
    assert "max_tokens" not in body


async def test_local_models_get_max_tokens_for_llama_cpp() -> None:
    with ScriptedServer([Reply(content="ok")]) as server:
        client, _ = _client(server, name="local/gemma3-270m")
        await client.complete(QUESTION, max_output_tokens=64)
        await client.aclose()
    body = server.requests[0].json
    assert body["max_tokens"] == 64 and "max_completion_tokens" not in body
    assert body["model"] == "gemma3-270m"


async def test_missing_usage_is_estimated_with_tiktoken_and_flagged() -> None:
    call = ToolCallSpec("python", '{"code": "print(6 * 7)"}')
    with ScriptedServer([Reply(content="Let me compute.", tool_calls=[call], usage=None)]) as server:
        client, _ = _client(server)
        response = await client.complete(QUESTION, tools=[PYTHON_TOOL])
        await client.aclose()
    usage = response.usage
    assert usage.estimated is True
    assert usage.input_tokens == tokens.estimate_prompt_tokens(QUESTION, [PYTHON_TOOL])
    assert usage.output_tokens == tokens.estimate_output_tokens(
        "Let me compute.", [("python", call.arguments)]
    )
    assert usage.input_tokens > tokens.count_text_tokens(QUESTION[0]["content"]) > 0


def test_estimates_use_real_tiktoken_offline() -> None:
    assert tokens.tokenizer_name() == tokens.OFFLINE_ENCODING
    # Known cl100k_base ids: "hello world" is two tokens.
    assert tokens.count_text_tokens("hello world") == 2
    assert tokens.count_text_tokens("<|endoftext|>") > 1  # special text counted as text, not rejected


async def test_429_retry_after_is_honoured_and_counted() -> None:
    script = [HttpError(429, "slow down", retry_after="1"), Reply(content="done")]
    with ScriptedServer(script) as server:
        client, reasons = _client(server)
        response = await client.complete(QUESTION)
        await client.aclose()
    assert response.content == "done" and response.retries == 1
    assert reasons == ["rate limited (429)"]
    gap = server.requests[1].received_at - server.requests[0].received_at
    assert gap >= 0.95, f"retried after {gap:.3f}s despite Retry-After: 1"


async def test_retry_after_ms_header_is_honoured() -> None:
    script = [HttpError(429, "slow down", retry_after_ms="300", retry_after="30"), Reply(content="done")]
    with ScriptedServer(script) as server:
        client, _ = _client(server)
        response = await client.complete(QUESTION)
        await client.aclose()
    gap = server.requests[1].received_at - server.requests[0].received_at
    assert response.retries == 1
    assert 0.28 <= gap < 5, gap  # the finer header wins over the 30 s one


def test_retry_after_parsing() -> None:
    assert parse_retry_after({"Retry-After": "7"}) == 7.0
    assert parse_retry_after({"retry-after-ms": "250"}) == 0.25
    now = 1_800_000_000.0
    date = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(now + 12))
    assert parse_retry_after({"Retry-After": date}, now=now) == pytest.approx(12.0, abs=1.0)
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({}) is None


def test_backoff_grows_exponentially_with_jitter() -> None:
    policy = RetryPolicy(base_delay_s=1.0, max_delay_s=8.0)
    for retry_number, ceiling in [(0, 1.0), (1, 2.0), (2, 4.0), (3, 8.0), (6, 8.0)]:
        waits = {policy.backoff(retry_number) for _ in range(50)}
        assert all(ceiling / 2 <= w <= ceiling for w in waits)
        assert len(waits) > 1  # jittered, not lockstep


async def test_server_errors_are_retried_until_success() -> None:
    script = [
        HttpError(500, "boom"),
        HttpError(502, "bad gateway"),
        HttpError(503, "busy"),
        Reply(content="ok"),
    ]
    with ScriptedServer(script) as server:
        client, reasons = _client(server)
        response = await client.complete(QUESTION)
        await client.aclose()
    assert response.content == "ok" and response.retries == 3
    assert reasons == ["HTTP 500", "HTTP 502", "HTTP 503"]
    assert server.call_count == 4


async def test_slow_reply_past_the_timeout_is_retried() -> None:
    with ScriptedServer([Reply(content="late", delay_s=10.0), Reply(content="on time")]) as server:
        client, reasons = _client(server, request_timeout_s=1.0)
        response = await client.complete(QUESTION)
        await client.aclose()
    assert response.content == "on time" and response.retries == 1
    assert reasons == ["timeout"]


async def test_dropped_connection_is_retried() -> None:
    with ScriptedServer([Drop(), Reply(content="back")]) as server:
        client, reasons = _client(server)
        response = await client.complete(QUESTION)
        await client.aclose()
    assert response.content == "back" and response.retries == 1
    assert reasons == ["connection error"]


@pytest.mark.parametrize("status", [401, 403])
async def test_auth_errors_are_never_retried(status: int) -> None:
    with ScriptedServer([HttpError(status, "invalid api key"), Reply(content="unreachable")]) as server:
        client, reasons = _client(server)
        with pytest.raises(ModelError, match=rf"HTTP {status}.*invalid api key.*OPENAI_API_KEY"):
            await client.complete(QUESTION)
        await client.aclose()
    assert server.call_count == 1 and reasons == []


async def test_insufficient_quota_is_never_retried() -> None:
    script = [
        HttpError(429, "You exceeded your current quota", code="insufficient_quota"),
        Reply(content="x"),
    ]
    with ScriptedServer(script) as server:
        client, reasons = _client(server)
        with pytest.raises(ModelError, match="quota"):
            await client.complete(QUESTION)
        await client.aclose()
    assert server.call_count == 1 and reasons == []


async def test_bad_request_is_not_retried() -> None:
    with ScriptedServer([HttpError(400, "unknown parameter: foo"), Reply(content="x")]) as server:
        client, _ = _client(server)
        with pytest.raises(ModelError, match=r"HTTP 400.*unknown parameter"):
            await client.complete(QUESTION)
        await client.aclose()
    assert server.call_count == 1


async def test_exhausted_retries_raise_model_error() -> None:
    policy = RetryPolicy(max_retries=2, base_delay_s=0.001)
    with ScriptedServer([HttpError(500, "down")] * 5) as server:
        client, reasons = _client(server, policy=policy)
        with pytest.raises(ModelError, match="gave up after 2 retries"):
            await client.complete(QUESTION)
        await client.aclose()
    assert server.call_count == 3 and len(reasons) == 2


def test_retry_count_comes_from_config_by_default() -> None:
    config = ModelConfig(name="openai/m", base_url="http://127.0.0.1:9/v1", max_retries=1)
    assert OpenAIChatClient(config).retry_policy.max_retries == 1
    assert OpenAIResponsesClient(config).retry_policy.max_retries == 1


async def test_connection_limit_is_shared_per_endpoint() -> None:
    with ScriptedServer(lambda request, index: Reply(content=str(index), delay_s=0.3)) as server:
        first, _ = _client(server, max_connections=2)
        second, _ = _client(server, max_connections=2)
        replies = await asyncio.gather(*(c.complete(QUESTION) for c in [first, second] * 4))
        await first.aclose()
        await second.aclose()
    assert len(replies) == 8
    assert server.max_in_flight == 2, f"server saw {server.max_in_flight} requests at once"


async def test_responses_api_round_trip_with_tool_call() -> None:
    history = [
        {"role": "system", "content": "You are careful."},
        {"role": "user", "content": "Compute 6 * 7."},
        {
            "role": "assistant",
            "content": "Running code.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "python", "arguments": '{"code": "6*7"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "(nothing printed)"},
    ]
    reply = Reply(
        content="I'll print it.",
        tool_calls=[ToolCallSpec("python", '{"code": "print(6*7', id="call_2")],
        usage=ReportedUsage(300, 40, reasoning_tokens=25),
        reasoning="Needs a print.",
    )
    forced = {"type": "function", "function": {"name": "python"}}
    with ScriptedServer([reply]) as server:
        client, _ = _client(server, api="responses", reasoning_effort="medium")
        assert isinstance(client, OpenAIResponsesClient)
        response = await client.complete(
            history, tools=[PYTHON_TOOL], tool_choice=forced, max_output_tokens=500
        )
        await client.aclose()

    body = server.requests[0].json
    assert server.requests[0].path.endswith("/v1/responses")
    assert body["input"] == [
        {"role": "system", "content": "You are careful."},
        {"role": "user", "content": "Compute 6 * 7."},
        {"role": "assistant", "content": "Running code."},
        {"type": "function_call", "call_id": "call_1", "name": "python", "arguments": '{"code": "6*7"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "(nothing printed)"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "name": "python",
            "description": "Run Python code",
            "parameters": PYTHON_TOOL["function"]["parameters"],
            "strict": False,
        }
    ]
    assert body["tool_choice"] == {"type": "function", "name": "python"}
    assert body["max_output_tokens"] == 500
    assert body["reasoning"] == {"effort": "medium"}
    assert body["store"] is False

    assert response.content == "I'll print it."
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("call_2", "python", '{"code": "print(6*7')
    ]
    assert response.finish_reason == "tool_calls"
    assert response.reasoning == "Needs a print."
    assert (response.usage.input_tokens, response.usage.output_tokens, response.usage.reasoning_tokens) == (
        300,
        40,
        25,
    )
    assert response.usage.estimated is False


async def test_responses_api_retries_and_estimates_too() -> None:
    with ScriptedServer([HttpError(503, "busy"), Reply(content="fine", usage=None)]) as server:
        client, reasons = _client(server, api="responses")
        response = await client.complete(QUESTION)
        await client.aclose()
    assert response.retries == 1 and reasons == ["HTTP 503"]
    assert response.usage.estimated and response.usage.output_tokens == tokens.count_text_tokens("fine")


def test_endpoint_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(UserError, match="OPENAI_API_KEY"):
        Endpoint.from_config(ModelConfig(name="openai/gpt-5"))
    with pytest.raises(UserError, match="local"):
        Endpoint.from_config(ModelConfig(name="local/gemma3-270m"))

    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9999/v1/")
    endpoint = Endpoint.from_config(ModelConfig(name="openai/gpt-5"))
    assert endpoint.base_url == "http://127.0.0.1:9999/v1"  # loopback: no key needed

    monkeypatch.setenv("MY_KEY", "sk-test")
    cfg = ModelConfig(name="openai/gpt-5", base_url="https://example.invalid/v1", api_key_env="MY_KEY")
    endpoint = Endpoint.from_config(cfg, base_url_override="http://127.0.0.1:1234/v1")
    assert (endpoint.base_url, endpoint.api_key) == ("http://127.0.0.1:1234/v1", "sk-test")

    assert api_model_name("openai/gpt-5") == "gpt-5"
    assert api_model_name("meta-llama/Llama-3.1-8B") == "meta-llama/Llama-3.1-8B"


async def test_clients_share_one_tls_context_per_trust_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading the CA bundle is tens of ms of CPU: once per process, not once per client."""
    loads: list[object] = []
    original = ssl.SSLContext.load_verify_locations

    def counted(self: ssl.SSLContext, *args: Any, **kwargs: Any) -> None:
        loads.append(args or kwargs)
        original(self, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    endpoint_module._shared_tls_context.cache_clear()
    endpoint = Endpoint.from_config(ModelConfig(name="openai/m", base_url="https://127.0.0.1:9/v1"))
    clients = [endpoint.sdk_client() for _ in range(3)]
    assert len(loads) == 1
    # The CA file the library reads from the environment: a context of its own, as before.
    monkeypatch.setenv("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt")
    clients += [endpoint.sdk_client() for _ in range(2)]
    assert len(loads) == 2
    for client in clients:
        await client.close()


async def test_chat_replies_are_read_as_json_without_building_sdk_objects(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Nothing reads the SDK's typed reply: it is not built (agent/model/sdk_client.py, JsonReply)."""
    import openai._base_client as sdk_base

    built: list[object] = []
    original = sdk_base.construct_type

    def counted(**kwargs: Any) -> object:
        built.append(kwargs.get("type_"))
        return original(**kwargs)

    monkeypatch.setattr(sdk_base, "construct_type", counted)
    with ScriptedServer([Reply(tool_calls=[ToolCallSpec("python", '{"code": "print(1)"}')])]) as server:
        client, _ = _client(server)
        response = await client.complete(QUESTION)
        await client.aclose()
    assert [(c.name, c.arguments) for c in response.tool_calls] == [("python", '{"code": "print(1)"}')]
    assert built == []
