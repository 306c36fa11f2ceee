"""The protocol's numbers on the true total, whatever shape a gateway reports usage in.

A scripted gateway answers every call with 60,000 prompt tokens, 15,000 visible output tokens
and 45,000 reasoning tokens (120,000 in all), reported in one provider family's shape. Each
request is checked against the total the gateway really counted before it (the oracle, kept
on the server's side): no request once it reaches 1,000,000, forcing from 660,000, and never
more output allowed than remains. Before usage shapes were read, the shape with reasoning
outside ``completion_tokens`` counted 75,000 a call and ran past the cap.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from proctor.agent.inputs.config import ModelConfig
from proctor.agent.model.factory import make_client
from proctor.agent.results.records import Outcome, SampleRecord
from proctor.agent.tracks.frontiermath.track import FrontierMathTrack
from proctor.sandbox import Sandbox
from tests.frontiermath.support import context, integer_task, run_config
from tests.support.scripted_server import OMIT_TOTAL, Reply, ReportedUsage, ScriptedServer, Step

module_loop = pytest.mark.asyncio(loop_scope="module")
CAP, FORCE_AT = 1_000_000, 660_000
PROMPT, VISIBLE, REASONING = 60_000, 15_000, 45_000
TRUE_PER_CALL = PROMPT + VISIBLE + REASONING
FORCED = {"type": "function", "function": {"name": "submit_answer"}}

# Each provider family's report of the same 120,000 tokens.
SHAPES = {
    # Gemini gateways, xAI: reasoning only in the details, the total holds it.
    "reasoning_outside_output": ReportedUsage(PROMPT, VISIBLE, REASONING, total_tokens=TRUE_PER_CALL),
    # The same without a total: the reasoning count, larger than the output, shows it.
    "reasoning_outside_output_no_total": ReportedUsage(PROMPT, VISIBLE, REASONING, total_tokens=OMIT_TOTAL),
    # OpenAI: reasoning inside the completion.
    "reasoning_in_output": ReportedUsage(PROMPT, VISIBLE + REASONING, REASONING),
}


async def run_gateway(shape: str, api: str, sandbox: Sandbox) -> tuple[SampleRecord, list[dict[str, Any]]]:
    usage = SHAPES[shape]

    def script(request: dict[str, Any], index: int) -> Step:
        # The model never calls a tool (a server that ignores tool_choice): only the budget ends it.
        return Reply(content=f"still working ({index})", usage=usage)

    cfg = ModelConfig(name="openai/scripted-model", base_url="http://unused", api=api, max_retries=0)
    with ScriptedServer(script) as server:
        client = make_client(cfg.model_copy(update={"base_url": server.base_url}))
        try:
            record = await FrontierMathTrack({}).run_sample(
                integer_task(),
                0,
                context(client, sandbox, run_config(token_cap=CAP, force_submit_at=FORCE_AT)),
            )
        finally:
            await client.aclose()
        bodies = [request.json for request in server.requests]
    return record, bodies


def violations(bodies: list[dict[str, Any]], api: str) -> list[str]:
    """Every request that broke a rule, judged on the gateway's true total before it."""
    found: list[str] = []
    limit_field = "max_output_tokens" if api == "responses" else "max_completion_tokens"
    for index, body in enumerate(bodies):
        true_used = index * TRUE_PER_CALL
        if true_used >= CAP:
            found.append(f"request {index + 1} sent with {true_used:,} tokens used")
        forced = body.get("tool_choice") in (FORCED, {"type": "function", "name": "submit_answer"})
        if forced != (true_used >= FORCE_AT):
            found.append(f"request {index + 1}: forced={forced} at {true_used:,} tokens")
        allowed = body.get(limit_field)
        if allowed is None or allowed > CAP - true_used:
            found.append(f"request {index + 1} allowed {allowed} output tokens with {CAP - true_used:,} left")
    return found


@module_loop
@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
async def test_a_gateway_in_each_usage_shape_runs_with_no_violation(
    shape: str, api: str, sandbox: Sandbox
) -> None:
    record, bodies = await run_gateway(shape, api, sandbox)
    assert violations(bodies, api) == []
    # 8 calls reach 960,000; the 9th would cross the cap and is not sent.
    assert len(bodies) == 8
    assert record.total_tokens == 8 * TRUE_PER_CALL
    assert record.outcome is Outcome.NO_SUBMISSION and record.cap_reached
    # Forced from the first request at or past 660,000 (after 6 calls: 720,000).
    assert record.forced_submission_turn == 7
    assert [t.cumulative_tokens for t in record.turns] == [TRUE_PER_CALL * n for n in range(1, 9)]
    expected_shape = shape.removesuffix("_no_total")
    assert {t.usage_shape for t in record.turns} == {expected_shape}
    assert record.output_tokens == 8 * (VISIBLE + REASONING) and record.reasoning_tokens == 8 * REASONING


@module_loop
async def test_the_forced_notice_and_the_messages_quote_the_true_total(sandbox: Sandbox) -> None:
    _, bodies = await run_gateway("reasoning_outside_output", "chat", sandbox)
    notice = bodies[6]["messages"][-1]
    assert notice["role"] == "user" and "720,000 tokens" in notice["content"]


def test_the_oracle_sees_the_old_count_as_violations() -> None:
    """The oracle is not vacuous: the requests the old count (75,000 a call) would have sent."""
    old_per_call = PROMPT + VISIBLE
    bodies = []
    used = 0
    while used + old_per_call < CAP:
        bodies.append(
            {
                "tool_choice": FORCED if used >= FORCE_AT else "auto",
                "max_completion_tokens": CAP - used - old_per_call - 1,
            }
        )
        used += old_per_call
    assert len(violations(bodies, "chat")) > 10
    assert json.dumps(bodies)  # plain data, as the server records it
