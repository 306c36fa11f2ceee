"""The token budget: forcing at the threshold, the cap never crossed, output capped, estimates flagged."""

from __future__ import annotations

import math
import random

import pytest

from proctor.agent.model.base import Usage
from proctor.agent.model.budget import ESTIMATE_MARGIN, MAX_ESTIMATE_SCALE, TokenBudget


def test_forces_submission_from_the_threshold() -> None:
    budget = TokenBudget(token_cap=1000, force_submit_at=660)
    budget.add_message_tokens(50)
    assert not budget.plan_request().force_submission
    budget.record_response(Usage(input_tokens=600, output_tokens=59))
    assert budget.used == 659 and not budget.submission_due
    budget.record_response(Usage(input_tokens=0, output_tokens=1))
    assert budget.submission_due
    plan = budget.plan_request()
    assert plan.send and plan.force_submission
    row = budget.record_response(Usage(input_tokens=10, output_tokens=5), forced=True)
    assert row.forced_submission and budget.forced_submission_turn == 3 == row.turn


def test_every_request_from_the_threshold_is_forced_until_the_cap() -> None:
    """Forcing lasts: the budget never stops forcing once the threshold is passed; only the cap
    (a request that could cross it) ends the forced turns."""
    budget = TokenBudget(token_cap=1000, force_submit_at=660)
    forced: list[bool] = []
    while (plan := budget.plan_request()).send:
        forced.append(plan.force_submission)
        budget.record_response(Usage(input_tokens=10, output_tokens=100), forced=plan.force_submission)
    assert forced.index(True) == 6 and all(forced[6:]) and not any(forced[:6])
    assert len(forced) > 7 and budget.cap_reached and budget.used < 1000


def test_cap_ends_the_conversation_at_once() -> None:
    budget = TokenBudget(token_cap=1000, force_submit_at=660)
    budget.record_response(Usage(input_tokens=900, output_tokens=150))
    assert budget.exhausted and budget.cap_reached
    plan = budget.plan_request()
    assert not plan.send and "token cap reached" in (plan.stop_reason or "")


def test_prompt_that_would_cross_the_cap_is_not_sent() -> None:
    budget = TokenBudget(token_cap=1000, force_submit_at=660)
    budget.record_response(Usage(input_tokens=400, output_tokens=100))
    budget.add_message_tokens(10)
    # Next prompt is about 400 + 100 + 10 = 510 tokens: 500 + 510 > 1000.
    plan = budget.plan_request()
    assert not plan.send and budget.cap_reached
    assert plan.prompt_estimate >= 510
    assert "would cross" in (plan.stop_reason or "")


def test_output_is_capped_so_prompt_plus_output_stays_under_the_cap() -> None:
    budget = TokenBudget(token_cap=1000, force_submit_at=660, max_output_tokens=300)
    budget.add_message_tokens(100)
    plan = budget.plan_request()
    assert plan.max_output_tokens == 300  # the configured ceiling binds first
    budget.record_response(Usage(input_tokens=100, output_tokens=200))
    budget.add_message_tokens(50)
    plan = budget.plan_request()
    # used 300, prompt ~350 (+ margin): at most 1000 - 300 - prompt - 1 tokens of output.
    assert plan.max_output_tokens is not None
    assert 300 + plan.prompt_estimate + plan.max_output_tokens < 1000
    assert plan.prompt_estimate == 350 + int(350 * ESTIMATE_MARGIN)


def test_random_conversations_never_cross_the_cap() -> None:
    rng = random.Random(1234)
    for _ in range(200):
        cap = rng.randint(2_000, 50_000)
        budget = TokenBudget(token_cap=cap, force_submit_at=int(cap * 0.66))
        budget.add_message_tokens(rng.randint(100, 1_000))
        previous_prompt = 0
        for _turn in range(500):
            plan = budget.plan_request()
            if not plan.send:
                break
            assert plan.max_output_tokens is not None and plan.max_output_tokens >= 1
            # A provider whose tokenizer agrees with ours within the margin, using all output allowed.
            prompt = min(plan.prompt_estimate, int(plan.prompt_estimate / (1 + ESTIMATE_MARGIN)) + 1)
            assert prompt >= previous_prompt
            budget.record_response(Usage(input_tokens=prompt, output_tokens=plan.max_output_tokens))
            assert budget.used < cap
            previous_prompt = prompt
            budget.add_message_tokens(rng.randint(5, 2_000))
        assert budget.cap_reached and budget.used < cap


def test_estimated_usage_is_flagged_for_good() -> None:
    budget = TokenBudget(token_cap=10_000, force_submit_at=6_600)
    budget.record_response(Usage(input_tokens=10, output_tokens=5))
    assert not budget.estimated
    row = budget.record_response(Usage(input_tokens=10, output_tokens=5, estimated=True))
    budget.record_response(Usage(input_tokens=10, output_tokens=5))
    assert row.estimated and budget.estimated


def test_totals_count_input_output_and_reasoning() -> None:
    budget = TokenBudget(token_cap=10_000, force_submit_at=6_600)
    budget.record_response(Usage(input_tokens=100, output_tokens=50, reasoning_tokens=30))
    row = budget.record_response(Usage(input_tokens=200, output_tokens=20, reasoning_tokens=5))
    assert (budget.input_tokens, budget.output_tokens, budget.reasoning_tokens) == (300, 70, 35)
    assert budget.used == 370 == row.cumulative_tokens


def test_prompt_estimate_is_incremental() -> None:
    budget = TokenBudget(token_cap=10**9, force_submit_at=10**8, fixed_prompt_tokens=40)
    budget.add_message_tokens(60)
    # Before any reply showed how the provider counts, the worst case is assumed.
    assert budget.next_prompt_estimate() == 200 + int(200 * ESTIMATE_MARGIN)
    budget.plan_request()
    budget.record_response(Usage(input_tokens=100, output_tokens=5_600))
    assert budget.calibrated and budget.estimate_scale == 1.0
    budget.add_message_tokens(300)
    # Previous input + its reply + what was appended since; nothing else is recounted.
    assert budget.next_prompt_estimate() == 6_000 + int(6_000 * ESTIMATE_MARGIN)


def test_estimates_learn_a_provider_tokenizer_that_counts_more() -> None:
    # The provider counts appended text 1.5x what our tokenizer says (as Gemma's did against
    # cl100k in the quickstart, which crossed an 8,000-token cap by 27 before calibration).
    rng = random.Random(7)
    for _ in range(100):
        cap = rng.randint(4_000, 40_000)
        budget = TokenBudget(token_cap=cap, force_submit_at=int(cap * 0.66), fixed_prompt_tokens=300)
        budget.add_message_tokens(rng.randint(200, 800))
        base = 0
        for _turn in range(300):
            plan = budget.plan_request()
            if not plan.send:
                break
            assert plan.max_output_tokens is not None
            appended = budget._estimated_part()
            reported_input = base + math.ceil(appended * 1.5)
            output = plan.max_output_tokens
            budget.record_response(Usage(input_tokens=reported_input, output_tokens=output))
            assert budget.used < cap, (cap, budget.used, budget.estimate_scale)
            base = reported_input + output
            budget.add_message_tokens(rng.randint(40, 600))
        assert budget.estimate_scale == pytest.approx(1.5, rel=0.01)


def test_calibration_ignores_tiny_appends_and_estimated_usage() -> None:
    budget = TokenBudget(token_cap=10**6, force_submit_at=10**5)
    budget.add_message_tokens(5)
    budget.plan_request()
    budget.record_response(Usage(input_tokens=50, output_tokens=10))  # 10x, but on 5 tokens
    assert not budget.calibrated
    budget.add_message_tokens(100)
    budget.plan_request()
    budget.record_response(Usage(input_tokens=60 + 300, output_tokens=10, estimated=True))
    assert not budget.calibrated
    budget.add_message_tokens(100)
    budget.plan_request()
    budget.record_response(Usage(input_tokens=370 + 900, output_tokens=10))  # 9x: bounded
    assert budget.estimate_scale == MAX_ESTIMATE_SCALE
