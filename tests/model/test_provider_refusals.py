"""Provider refusals of the model's own conversation vs infrastructure failures, over real HTTP.

Each test is one row of the table in docs/models.md ("Provider refusals"): the body a provider
sends (OpenAI, Azure OpenAI, vLLM, llama.cpp's server, OpenRouter, in the shapes they document
or send), through the real openai SDK, and what the client raises. ``ProviderRefusal`` is the
model's outcome (scored, kept by --resume); any other ``ModelError`` is an excluded error.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.agent.inputs.config import ModelConfig
from proctor.agent.model.base import EndpointRefused, ModelClient, ModelError, ProviderRefusal
from proctor.agent.model.factory import make_client
from proctor.agent.model.provider_outcome import (
    MAX_CODE_CHARS,
    MAX_MESSAGE_CHARS,
    RefusalKind,
    classify_error,
)
from proctor.agent.model.retry import RetryPolicy
from proctor.agent.results.records import Outcome
from proctor.agent.tracks.base import model_failure
from tests.support.scripted_server import Drop, HttpError, RawReply, Reply, ScriptedServer, Step, ToolCallSpec

FAST = RetryPolicy(max_retries=2, base_delay_s=0.001, max_delay_s=0.01)
QUESTION = [{"role": "user", "content": "What is 6 * 7?"}]


def _client(server: ScriptedServer, api: str = "chat") -> ModelClient:
    config = ModelConfig(name="openai/test-model", base_url=server.base_url, api=api)
    return make_client(config, retry_policy=FAST)


async def _refusal(steps: list[Step], api: str = "chat") -> tuple[ProviderRefusal, ScriptedServer]:
    with ScriptedServer(steps) as server:
        client = _client(server, api)
        try:
            with pytest.raises(ProviderRefusal) as caught:
                await client.complete(QUESTION)
        finally:
            await client.aclose()
    return caught.value, server


async def _infrastructure(steps: list[Step]) -> tuple[ModelError, ScriptedServer]:
    with ScriptedServer(steps) as server:
        client = _client(server)
        try:
            with pytest.raises(ModelError) as caught:
                await client.complete(QUESTION)
        finally:
            await client.aclose()
    assert not isinstance(caught.value, ProviderRefusal)
    assert model_failure(caught.value).outcome is Outcome.MODEL_ERROR
    return caught.value, server


def _openai_error(message: str, code: str, type_: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


# --- the model's outcome -------------------------------------------------------------------


async def test_openai_context_length_exceeded_is_the_models_outcome_and_not_retried() -> None:
    body = _openai_error(
        "Input tokens exceed the configured limit of 272000 tokens.", "context_length_exceeded"
    )
    refusal, server = await _refusal([HttpError(400, body=body), Reply(content="never sent")])
    assert server.call_count == 1  # not retried: the same conversation meets the same answer
    verdict = refusal.verdict
    assert (verdict.kind, verdict.status, verdict.code) == (
        RefusalKind.CONTEXT_OVERFLOW,
        400,
        "context_length_exceeded",
    )
    assert "272000" in verdict.message
    failure = model_failure(refusal)
    assert failure.outcome is Outcome.PROVIDER_REFUSAL and failure.refusal is not None
    assert failure.refusal.kind == "context_overflow" and failure.refusal.code == "context_length_exceeded"


async def test_openai_invalid_prompt_is_a_refusal() -> None:
    body = _openai_error("Invalid prompt: flagged under the usage policy.", "invalid_prompt")
    refusal, server = await _refusal([HttpError(400, body=body)])
    assert refusal.verdict.kind is RefusalKind.REFUSED and refusal.verdict.code == "invalid_prompt"
    assert server.call_count == 1


async def test_openai_content_policy_violation_is_a_refusal() -> None:
    body = _openai_error("Request rejected by the safety system.", "content_policy_violation")
    refusal, _ = await _refusal([HttpError(400, body=body)])
    assert refusal.verdict.kind is RefusalKind.REFUSED


async def test_azure_content_filter_error_with_innererror_is_a_content_filter() -> None:
    body = {
        "error": {
            "message": "The response was filtered: the prompt triggered the content management policy.",
            "type": None,
            "param": "prompt",
            "code": "content_filter",
            "status": 400,
            "innererror": {
                "code": "ResponsibleAIPolicyViolation",
                "content_filter_result": {"violence": {"filtered": True, "severity": "high"}},
            },
        }
    }
    refusal, _ = await _refusal([HttpError(400, body=body)])
    verdict = refusal.verdict
    assert verdict.kind is RefusalKind.CONTENT_FILTER
    assert verdict.code == "content_filter/responsibleaipolicyviolation"


async def test_azure_innererror_alone_is_a_content_filter() -> None:
    body = {
        "error": {
            "message": "filtered",
            "code": "BadRequest",
            "innererror": {"code": "ResponsibleAIPolicyViolation"},
        }
    }
    refusal, _ = await _refusal([HttpError(400, body=body)])
    assert refusal.verdict.kind is RefusalKind.CONTENT_FILTER


async def test_finish_reason_content_filter_without_a_tool_call_is_a_content_filter() -> None:
    refusal, _ = await _refusal([Reply(content="", finish_reason="content_filter")])
    assert refusal.verdict.kind is RefusalKind.CONTENT_FILTER and refusal.verdict.status == 200


async def test_responses_api_incomplete_for_content_filter_is_a_content_filter() -> None:
    body = {
        "id": "resp_1",
        "object": "response",
        "created_at": 0,
        "model": "test-model",
        "status": "incomplete",
        "incomplete_details": {"reason": "content_filter"},
        "output": [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }
    refusal, _ = await _refusal([RawReply(body=body)], api="responses")
    assert refusal.verdict.kind is RefusalKind.CONTENT_FILTER


async def test_finish_reason_content_filter_with_a_tool_call_is_still_the_models_move() -> None:
    call = ToolCallSpec("python", json.dumps({"code": "print(1)"}))
    with ScriptedServer([Reply(tool_calls=[call], finish_reason="content_filter")]) as server:
        client = _client(server)
        response = await client.complete(QUESTION)
        await client.aclose()
    assert response.tool_calls and response.finish_reason == "content_filter"


async def test_vllm_flat_body_maximum_context_length_is_an_overflow() -> None:
    body = {
        "object": "error",
        "message": "This model's maximum context length is 32768 tokens. However, you requested 40000 "
        "tokens in the messages. Please reduce the length of the messages.",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }
    refusal, _ = await _refusal([HttpError(400, body=body)])
    assert refusal.verdict.kind is RefusalKind.CONTEXT_OVERFLOW
    assert refusal.verdict.code == "badrequesterror"


async def test_llama_cpp_exceed_context_size_error_is_an_overflow() -> None:
    body = {
        "error": {
            "code": 400,
            "message": "the request exceeds the available context size, try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 9000,
            "n_ctx": 8192,
        }
    }
    refusal, _ = await _refusal([HttpError(400, body=body)])
    assert refusal.verdict.kind is RefusalKind.CONTEXT_OVERFLOW
    assert refusal.verdict.code == "exceed_context_size_error"


async def test_openrouter_moderation_403_with_flagged_input_is_a_refusal_not_an_auth_failure() -> None:
    body = {
        "error": {
            "code": 403,
            "message": "Input flagged by moderation",
            "metadata": {
                "reasons": ["violence"],
                "flagged_input": "...",
                "provider_name": "SomeProvider",
                "model_slug": "some/model",
            },
        }
    }
    refusal, server = await _refusal([HttpError(403, body=body)])
    assert refusal.verdict.kind is RefusalKind.REFUSED and refusal.verdict.status == 403
    assert not isinstance(refusal, EndpointRefused) and server.call_count == 1


async def test_openrouter_400_with_an_upstream_context_message_is_an_overflow() -> None:
    body = {
        "error": {
            "code": 400,
            "message": "This endpoint's maximum context length is 131072 tokens. However, you requested "
            "about 140000 tokens.",
            "metadata": {"provider_name": "SomeProvider", "raw": "..."},
        }
    }
    refusal, _ = await _refusal([HttpError(400, body=body)])
    assert refusal.verdict.kind is RefusalKind.CONTEXT_OVERFLOW


async def test_a_200_error_body_stating_a_refusal_is_the_models_outcome_and_not_retried() -> None:
    # OpenRouter: an error after the model started comes in a 200 body.
    body = {"error": {"code": "context_length_exceeded", "message": "context window exceeded mid-stream"}}
    refusal, server = await _refusal([RawReply(body=body), Reply(content="never sent")])
    assert refusal.verdict.kind is RefusalKind.CONTEXT_OVERFLOW and refusal.verdict.status == 200
    assert server.call_count == 1


# --- the other providers people benchmark, through their OpenAI-compatible fronts --------------
# Each body is the provider's documented error text (docs/models.md, "Provider refusals", says
# which texts were confirmed in public reports and which shapes are inferred).

GEMINI_OVERFLOW = "The input token count (1200293) exceeds the maximum number of tokens allowed (1048576)."


@pytest.mark.parametrize(
    "body",
    [
        # Google's endpoints wrap the error object in a list.
        [{"error": {"code": 400, "message": GEMINI_OVERFLOW, "status": "INVALID_ARGUMENT"}}],
        {"error": {"code": 400, "message": GEMINI_OVERFLOW, "status": "INVALID_ARGUMENT"}},
    ],
    ids=["list", "object"],
)
async def test_gemini_input_token_count_exceeds_the_maximum_is_an_overflow(body: Any) -> None:
    refusal, server = await _refusal([HttpError(400, body=body), Reply(content="never sent")])
    assert refusal.verdict.kind is RefusalKind.CONTEXT_OVERFLOW and server.call_count == 1
    assert "1048576" in refusal.verdict.message


async def test_xai_maximum_prompt_length_is_an_overflow() -> None:
    body = {
        "code": "Client specified an invalid argument",
        "error": "This model's maximum prompt length is 131072 but the request contains 136973 tokens.",
    }
    refusal, server = await _refusal([HttpError(400, body=body), Reply(content="never sent")])
    assert refusal.verdict.kind is RefusalKind.CONTEXT_OVERFLOW and server.call_count == 1
    assert "maximum prompt length is 131072" in refusal.verdict.message


@pytest.mark.parametrize(
    "message",
    [
        "input length and `max_tokens` exceed context limit: 201000 + 8192 > 200000, decrease input "
        "length or `max_tokens` and try again",
        "prompt is too long: 202128 tokens > 200000 maximum",
    ],
    ids=["input-and-max-tokens", "prompt-too-long"],
)
async def test_anthropic_compatible_context_limit_is_an_overflow(message: str) -> None:
    body = {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    refusal, server = await _refusal([HttpError(400, body=body), Reply(content="never sent")])
    assert refusal.verdict.kind is RefusalKind.CONTEXT_OVERFLOW and server.call_count == 1
    assert refusal.verdict.code == "invalid_request_error"


async def test_deepseek_maximum_context_length_is_an_overflow() -> None:
    body = _openai_error(
        "This model's maximum context length is 65536 tokens. However, you requested 87731 tokens "
        "(87731 in the messages, 0 in the completion). Please reduce the length of the messages or "
        "completion.",
        "invalid_request_error",
    )
    refusal, server = await _refusal([HttpError(400, body=body), Reply(content="never sent")])
    assert refusal.verdict.kind is RefusalKind.CONTEXT_OVERFLOW and server.call_count == 1


@pytest.mark.parametrize(
    "body",
    [
        "<html><head><title>413 Request Entity Too Large</title></head></html>",
        {"error": {"message": "Request body too large", "type": "invalid_request_error"}},
        {"detail": "payload too large"},
    ],
    ids=["html", "json-without-a-code", "other-json"],
)
async def test_a_413_is_an_overflow_whatever_its_body(body: Any) -> None:
    refusal, server = await _refusal([HttpError(413, body=body), Reply(content="never sent")])
    verdict = refusal.verdict
    assert (verdict.kind, verdict.status) == (RefusalKind.CONTEXT_OVERFLOW, 413)
    assert server.call_count == 1


async def test_a_422_stating_the_context_size_is_an_overflow() -> None:
    body = {
        "error": "Input validation error: `inputs` must have less than 4096 tokens. Given: 5000",
        "error_type": "validation",
    }
    refusal, _ = await _refusal([HttpError(422, body=body)])
    assert refusal.verdict.kind is RefusalKind.CONTEXT_OVERFLOW and refusal.verdict.status == 422


async def test_a_422_about_anything_else_stays_an_error() -> None:
    body = {
        "error": "Input validation error: `temperature` must be strictly positive",
        "error_type": "validation",
    }
    error, server = await _infrastructure([HttpError(422, body=body), Reply(content="x")])
    assert "HTTP 422" in str(error) and server.call_count == 1


@pytest.mark.parametrize(
    "message",
    [
        "max_tokens: 999000 > 64000, which is the maximum allowed number of output tokens for claude-x",
        "Unable to submit request because it has a maxOutputTokens value of 999000 but the supported "
        "range is from 1 (inclusive) to 65537 (exclusive). Update the value and try again.",
        "Invalid 'max_output_tokens': integer above maximum value. Expected a value <= 128000, but got "
        "999000 instead.",
        "Invalid max_tokens value, the valid range of max_tokens is [1, 8192]",
    ],
)
def test_an_output_maximum_is_never_a_refusal_of_the_conversation(message: str) -> None:
    """The FrontierMath loop asks again within the limit (test_output_limits.py); the refusal is
    of the request's output allowance, never the model's outcome."""
    assert classify_error(400, {"error": {"message": message, "type": "invalid_request_error"}}) is None


# --- infrastructure: excluded errors, re-run by --resume ----------------------------------------


async def test_a_200_error_body_without_a_refusal_is_retried_then_an_error() -> None:
    body = {"error": {"code": 502, "message": "Provider returned error"}}
    _, server = await _infrastructure([RawReply(body=body)] * 3)
    assert server.call_count == 3  # one try and two retries


async def test_401_is_auth_whatever_the_body_says() -> None:
    body = _openai_error("maximum context length; content_filter", "content_filter")
    error, _ = await _infrastructure([HttpError(401, body=body)])
    assert isinstance(error, EndpointRefused) and error.kind == "auth"


async def test_403_without_moderation_evidence_is_auth() -> None:
    body = {"error": {"code": 403, "message": "This model's maximum context length is 10 tokens. Forbidden."}}
    error, _ = await _infrastructure([HttpError(403, body=body)])
    assert isinstance(error, EndpointRefused) and error.kind == "auth"


async def test_429_insufficient_quota_is_quota() -> None:
    error, _ = await _infrastructure([HttpError(429, "You exceeded your quota", code="insufficient_quota")])
    assert isinstance(error, EndpointRefused) and error.kind == "quota"


async def test_5xx_after_retries_is_an_error_even_with_a_context_message() -> None:
    step = HttpError(
        500,
        body={
            "error": {
                "message": "maximum context length exceeded upstream",
                "code": "context_length_exceeded",
            }
        },
    )
    _, server = await _infrastructure([step] * 3)
    assert server.call_count == 3


async def test_dropped_connections_after_retries_are_an_error() -> None:
    _, server = await _infrastructure([Drop()] * 3)
    assert server.call_count == 3


async def test_another_400_is_a_request_fault_not_a_refusal() -> None:
    body = _openai_error("Unrecognized request argument supplied: foo", "unknown_parameter")
    error, server = await _infrastructure([HttpError(400, body=body), Reply(content="x")])
    assert "HTTP 400" in str(error) and server.call_count == 1


# --- what is recorded: bounded and sanitised --------------------------------------------------


async def test_a_hostile_message_is_recorded_bounded_and_without_control_characters() -> None:
    hostile = "\x1b[31mred\x1b[0m \u202eevil\u202c \x00" + "x" * 100_000
    body = _openai_error(hostile, "content_filter")
    body["error"]["innererror"] = {"code": "\x1b[2J" + "y" * 190}
    refusal, _ = await _refusal([HttpError(400, body=body)])
    record = model_failure(refusal).refusal
    assert record is not None
    assert len(record.message) <= MAX_MESSAGE_CHARS and len(record.code or "") <= MAX_CODE_CHARS
    for text in (record.message, record.code or ""):
        assert not any(unicodedata.category(ch)[0] == "C" for ch in text)
    assert record.message.startswith("[31mred [0m evil")
    assert (record.code or "").startswith("content_filter/ [2jyyy")


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
    max_leaves=20,
)
WORDS = st.sampled_from(
    [
        "context_length_exceeded",
        "invalid_prompt",
        "content_filter",
        "exceed_context_size_error",
        "x",
        400,
        None,
    ]
)
ERRORISH = st.fixed_dictionaries(
    {},
    optional={
        "code": WORDS,
        "type": WORDS,
        "message": st.text(max_size=60) | st.just("maximum context length is 5 tokens"),
        "metadata": st.dictionaries(st.sampled_from(["reasons", "flagged_input", "raw"]), JSON, max_size=2)
        | JSON,
        "innererror": st.fixed_dictionaries({"code": WORDS}) | JSON,
    },
)


@settings(max_examples=300, deadline=None)
@given(status=st.sampled_from([401, 402, 404, 408, 409, 429, 500, 502, 503, 504]), body=JSON | ERRORISH)
def test_no_body_makes_an_infrastructure_status_a_refusal(status: int, body: Any) -> None:
    """Credentials, credit, missing models, rate limits and server faults are never the model's."""
    assert classify_error(status, body) is None
    assert classify_error(status, {"error": body}) is None


@settings(max_examples=300, deadline=None)
@given(
    status=st.sampled_from([200, 400, 403, 413, 422]),
    body=JSON | ERRORISH | st.builds(lambda e: {"error": e}, ERRORISH),
)
def test_any_body_classifies_without_raising_and_records_bounded_clean_text(status: int, body: Any) -> None:
    verdict = classify_error(status, body)
    if verdict is None:
        return
    assert len(verdict.message) <= MAX_MESSAGE_CHARS and len(verdict.code or "") <= MAX_CODE_CHARS
    assert not any(unicodedata.category(ch)[0] == "C" for ch in verdict.message + (verdict.code or ""))
    if status == 403:
        # A 403 is a refusal only on a code or moderation metadata, never on a message's words.
        first = body[0] if isinstance(body, list) and body else body
        error = first.get("error", first) if isinstance(first, dict) else first
        assert isinstance(error, dict)
        metadata = error.get("metadata")
        has_metadata = isinstance(metadata, dict) and ({"reasons", "flagged_input"} & set(metadata))
        assert has_metadata or verdict.code is not None
