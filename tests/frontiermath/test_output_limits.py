"""The first request asks for the room under the cap (~999k output tokens); each provider front
refuses that in its own words. The loop reads the stated maximum (or the room the context
leaves), asks again within it, once, and keeps it as the conversation's ceiling.

End to end: the real openai SDK and Proctor's clients against a scripted server on 127.0.0.1.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.agent.inputs.config import ModelConfig
from proctor.agent.model.factory import make_client
from proctor.agent.results.records import Outcome, SampleRecord
from proctor.agent.tracks.frontiermath.provider_limits import output_ceiling_from_error
from proctor.agent.tracks.frontiermath.track import FrontierMathTrack
from proctor.sandbox import Sandbox
from tests.frontiermath.support import context, integer_task, run_config
from tests.support.scripted_server import HttpError, Reply, ScriptedServer, Step

module_loop = pytest.mark.asyncio(loop_scope="module")


def _error(message: str, *, wrapped_in_list: bool = False) -> HttpError:
    error = {"message": message, "type": "invalid_request_error", "param": "max_tokens", "code": None}
    body: Any = [{"error": error}] if wrapped_in_list else {"error": error}
    return HttpError(400, body=body)


def _requested(requested: int) -> dict[str, HttpError]:
    """Each front's refusal of a request for ``requested`` output tokens."""
    return {
        "openai-responses": _error(
            f"Invalid 'max_output_tokens': integer above maximum value. Expected a value <= 128000, but got "
            f"{requested} instead."
        ),
        "anthropic-compatible": _error(
            f"max_tokens: {requested} > 64000, which is the maximum allowed number of output tokens for "
            "claude-sonnet-4-20250514"
        ),
        "gemini": _error(
            "Unable to submit request because it has a maxOutputTokens value of "
            f"{requested} but the supported range is from 1 (inclusive) to 65537 (exclusive). "
            "Update the value and try again.",
            wrapped_in_list=True,
        ),
        "deepseek": _error("Invalid max_tokens value, the valid range of max_tokens is [1, 8192]"),
        "anthropic-context": _error(
            f"input length and `max_tokens` exceed context limit: 1500 + {requested} > 200000, "
            "decrease input length or `max_tokens` and try again"
        ),
    }


CEILINGS = {
    "openai-responses": 128_000,
    "anthropic-compatible": 64_000,
    "gemini": 65_536,
    "deepseek": 8_192,
    "anthropic-context": 198_500,
}


async def run_front(front: str, sandbox: Sandbox) -> tuple[SampleRecord, list[dict[str, Any]], str]:
    api = "responses" if front == "openai-responses" else "chat"
    field = "max_output_tokens" if api == "responses" else "max_completion_tokens"

    def script(request: dict[str, Any], index: int) -> Step:
        if index == 0:
            return _requested(int(request[field]))[front]
        # Text only: the limits are the subject here, not the sandbox (two turns, then the bound).
        return Reply(content=f"working ({index})")

    cfg = ModelConfig(name="openai/scripted-model", base_url="http://unused", api=api, max_retries=0)
    with ScriptedServer(script) as server:
        client = make_client(cfg.model_copy(update={"base_url": server.base_url}))
        try:
            config = run_config(track_options={"max_turns": 2})
            record = await FrontierMathTrack(config.track_options).run_sample(
                integer_task(), 0, context(client, sandbox, config)
            )
        finally:
            await client.aclose()
        bodies = [request.json for request in server.requests]
    return record, bodies, field


@module_loop
@pytest.mark.parametrize("front", sorted(CEILINGS))
async def test_an_output_limit_refusal_is_asked_again_within_the_limit(front: str, sandbox: Sandbox) -> None:
    record, bodies, field = await run_front(front, sandbox)
    ceiling = CEILINGS[front]
    assert bodies[0][field] > ceiling  # the room under the 1,000,000 cap
    # The retry, then the next turn: the stated maximum is the conversation's ceiling from now on.
    assert [body[field] for body in bodies[1:]] == [ceiling, ceiling]
    assert len(record.turns) == 2 and record.outcome is Outcome.NO_SUBMISSION
    assert "stopped after 2 turns" in (record.error or "")


@module_loop
async def test_a_second_refusal_is_the_outcome_not_a_loop(sandbox: Sandbox) -> None:
    refusal = _requested(999_000)["anthropic-compatible"]
    script: list[Step] = [refusal, refusal, Reply(content="never sent")]
    with ScriptedServer(script) as server:
        cfg = ModelConfig(name="openai/scripted-model", base_url=server.base_url, max_retries=0)
        client = make_client(cfg)
        try:
            record = await FrontierMathTrack({}).run_sample(
                integer_task(), 0, context(client, sandbox, run_config())
            )
        finally:
            await client.aclose()
        assert server.call_count == 2
    assert record.outcome is Outcome.MODEL_ERROR and "maximum allowed number of output tokens" in (
        record.error or ""
    )


@settings(max_examples=50, deadline=None)
@given(
    maximum=st.integers(1, 10**9), requested=st.integers(1, 10**9), front=st.sampled_from(sorted(CEILINGS))
)
def test_a_stated_maximum_is_read_whatever_the_numbers(maximum: int, requested: int, front: str) -> None:
    texts = {
        "openai-responses": f"Invalid 'max_output_tokens': integer above maximum value. Expected a value <= "
        f"{maximum}, but got {requested} instead.",
        "anthropic-compatible": f"max_tokens: {requested} > {maximum}, which is the maximum allowed "
        "number of output tokens for claude-x",
        "gemini": f"Unable to submit request because it has a maxOutputTokens value of {requested} but the "
        f"supported range is from 1 (inclusive) to {maximum + 1} (exclusive).",
        "deepseek": f"Invalid max_tokens value, the valid range of max_tokens is [1, {maximum}]",
        "anthropic-context": "input length and `max_tokens` exceed context limit: "
        f"{requested} + 5 > {maximum}, decrease input length or `max_tokens` and try again",
    }
    found = output_ceiling_from_error(f"https://host/v1 rejected the request (HTTP 400): {texts[front]}")
    if front == "anthropic-context":
        assert found == (maximum - requested if maximum > requested else None)
    else:
        assert found == maximum


def test_unrelated_messages_give_no_ceiling() -> None:
    for message in (
        "Unrecognized request argument supplied: foo",
        "temperature must be <= 2",
        "The input token count (1200293) exceeds the maximum number of tokens allowed (1048576).",
        "This model's maximum prompt length is 131072 but the request contains 136973 tokens.",
    ):
        assert output_ceiling_from_error(message) is None
