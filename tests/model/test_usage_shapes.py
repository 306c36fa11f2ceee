"""Every provider's usage shape read as one count (agent/model/usage.py).

Invariant: a reply counts toward the cap what the provider's own numbers show it used: the
reported total, prompt + completion, or prompt + completion + reasoning when the reasoning is
reported outside the completion, whichever is largest. The oracle below builds each usage block
from a true (prompt, visible output, reasoning, extra) and renders it the way each provider
family reports it; the count must equal the true total, and a budget fed those replies must
hold the cap and the forcing point on the true total.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proctor.agent.inputs.config import ModelConfig
from proctor.agent.model.base import ChatResponse
from proctor.agent.model.budget import TokenBudget
from proctor.agent.model.factory import make_client
from proctor.agent.model.openai_client import usage_from_counts
from proctor.agent.model.usage import UsageShape, normalize_usage
from tests.support.scripted_server import OMIT_TOTAL, Reply, ReportedUsage, ScriptedServer

# How each provider family reports one reply (the shapes in agent/model/usage.py's docstring).
SHAPES = ("openai", "openai_no_total", "outside_with_total", "outside_no_total", "total_above_parts")


@dataclass(frozen=True)
class TrueUsage:
    prompt: int
    visible: int
    reasoning: int
    # Tokens only the provider's total shows (e.g. a gateway's own framing).
    extra: int
    shape: str

    @property
    def total(self) -> int:
        return self.prompt + self.visible + self.reasoning + self.extra

    def reported(self) -> tuple[int, int, int, int | None]:
        """(prompt_tokens, completion_tokens, reasoning_tokens, total_tokens) as sent."""
        inside = (self.prompt, self.visible + self.reasoning, self.reasoning)
        if self.shape == "openai":
            return (*inside, self.total)
        if self.shape == "openai_no_total":
            return (*inside, None)
        if self.shape == "total_above_parts":
            return (*inside, self.total)
        if self.shape == "outside_with_total":
            return (self.prompt, self.visible, self.reasoning, self.total)
        return (self.prompt, self.visible, self.reasoning, None)


@st.composite
def true_usages(draw: st.DrawFn) -> TrueUsage:
    shape = draw(st.sampled_from(SHAPES))
    prompt = draw(st.integers(1, 200_000))
    visible = draw(st.integers(0, 50_000))
    reasoning = draw(st.integers(0, 100_000))
    if shape == "outside_no_total":
        # Without a total, reasoning outside the completion shows only when it is larger: a
        # smaller one is OpenAI's shape without a total, and is read so.
        reasoning = max(reasoning, visible + 1)
    extra = draw(st.integers(1, 20_000)) if shape == "total_above_parts" else 0
    return TrueUsage(prompt, visible, reasoning, extra, shape)


def counted(true: TrueUsage) -> int:
    prompt, completion, reasoning, total = true.reported()
    usage = usage_from_counts(
        prompt, completion, reasoning, total_tokens=total, estimate_input=lambda: 0, estimate_output=lambda: 0
    )
    return usage.total


def test_the_public_examples_count_their_reasoning() -> None:
    # A Gemini gateway: completion 0, reasoning 60, total 81 with a prompt of 21.
    gemini = normalize_usage(21, 0, 60, 81)
    assert (gemini.counted, gemini.output_tokens, gemini.shape) == (
        81,
        60,
        UsageShape.REASONING_OUTSIDE_OUTPUT,
    )
    # Gemini 2.5 Flash through a converter: completion 151, total 553, prompt 20 (382 reasoning).
    flash = normalize_usage(20, 151, 382, 553)
    assert flash.counted == 553 and flash.shape is UsageShape.REASONING_OUTSIDE_OUTPUT
    # OpenAI: reasoning inside the completion, the total agrees.
    openai = normalize_usage(100, 50, 30, 150)
    assert (openai.counted, openai.output_tokens, openai.shape) == (150, 50, UsageShape.REASONING_IN_OUTPUT)
    # No total, reasoning larger than the completion: it cannot be a part of it.
    assert normalize_usage(100, 10, 40, None).counted == 150
    # A total above every sum of the parts is what the provider counted.
    above = normalize_usage(100, 50, 0, 170)
    assert above.counted == 170 and above.shape is UsageShape.TOTAL_ABOVE_PARTS


@settings(max_examples=200, deadline=None)
@given(true=true_usages())
def test_every_shape_counts_the_true_total(true: TrueUsage) -> None:
    assert counted(true) == true.total


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=st.lists(true_usages(), min_size=1, max_size=40))
def test_the_cap_and_the_forcing_point_hold_on_the_true_total(calls: list[TrueUsage]) -> None:
    cap, force_at = 1_000_000, 660_000
    budget = TokenBudget(token_cap=cap, force_submit_at=force_at)
    true_used = 0
    for true in calls:
        plan = budget.plan_request()
        if true_used >= cap:
            assert not plan.send, "a request after the true total reached the cap"
            return
        if not plan.send:
            return
        assert plan.force_submission == (true_used >= force_at), (true_used, plan)
        assert plan.max_output_tokens is not None and plan.max_output_tokens <= cap - true_used - 1
        prompt, completion, reasoning, total = true.reported()
        usage = usage_from_counts(
            prompt,
            completion,
            reasoning,
            total_tokens=total,
            estimate_input=lambda: 0,
            estimate_output=lambda: 0,
        )
        budget.record_response(usage, forced=plan.force_submission)
        true_used += true.total
        assert budget.used == true_used
        assert budget.exhausted == (true_used >= cap)


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize(
    ("reported", "expected_total", "expected_shape"),
    [
        (ReportedUsage(60_000, 15_000, 45_000, total_tokens=120_000), 120_000, "reasoning_outside_output"),
        (ReportedUsage(60_000, 15_000, 45_000, total_tokens=OMIT_TOTAL), 120_000, "reasoning_outside_output"),
        (ReportedUsage(60_000, 60_000, 45_000), 120_000, "reasoning_in_output"),
        (ReportedUsage(60_000, 60_000, 45_000, total_tokens=OMIT_TOTAL), 120_000, "reasoning_in_output"),
        (ReportedUsage(60_000, 60_000, 0, total_tokens=125_000), 125_000, "total_above_parts"),
    ],
)
async def test_each_shape_over_real_http_through_the_sdk(
    api: str, reported: ReportedUsage, expected_total: int, expected_shape: str
) -> None:
    with ScriptedServer([Reply(content="thinking", usage=reported)]) as server:
        client = make_client(
            ModelConfig(name="openai/scripted-model", base_url=server.base_url, api=api, max_retries=0)
        )
        try:
            response: ChatResponse = await client.complete([{"role": "user", "content": "hi"}])
        finally:
            await client.aclose()
    assert response.usage.total == expected_total
    assert response.usage.shape == expected_shape
    assert response.usage.reasoning_tokens == reported.reasoning_tokens


@settings(max_examples=200, deadline=None)
@given(
    prompt=st.integers(0, 2**40),
    completion=st.integers(0, 2**40),
    reasoning=st.integers(0, 2**40),
    total=st.none() | st.integers(0, 2**41),
)
def test_no_report_lowers_the_count_below_any_of_its_parts(
    prompt: int, completion: int, reasoning: int, total: int | None
) -> None:
    """A hostile or broken server (a total below the parts, reasoning larger than the output,
    any mix) never makes a reply count less than any sum its own numbers show."""
    usage = normalize_usage(prompt, completion, reasoning, total)
    assert usage.counted >= prompt + completion
    assert usage.counted >= (total or 0)
    if reasoning > completion:
        assert usage.counted >= prompt + completion + reasoning
    assert usage.counted == max(usage.input_tokens + usage.output_tokens, total or 0)
