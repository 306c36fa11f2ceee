"""One reading of a reply's token usage, whatever shape the provider reports it in.

Providers disagree on where reasoning tokens go. OpenAI counts them inside the output
(``completion_tokens`` / ``output_tokens``) and says how many they were in
``completion_tokens_details.reasoning_tokens`` (``output_tokens_details`` for the Responses
API); ``total_tokens`` is then prompt + completion. Several gateways for Gemini, and xAI's own
usage, put them *only* in the details: ``completion_tokens`` is the visible reply and
``total_tokens`` is prompt + completion + reasoning (public examples: completion 0, reasoning 60,
total 81 with a prompt of 21; completion 151, total 553 with a prompt of 20 and 382 reasoning).
Reading prompt + completion there misses every reasoning token, and the 1,000,000-token cap
and the 660,000 forcing point are then counted on a fraction of the conversation.

The rule, for every reply of either API: the count is the largest of the reported total,
prompt + completion, and prompt + completion + reasoning when the shape shows the reasoning
outside the completion. A missing or unbelievable count is estimated from the text before
that, as before (``agent/model/openai_client.py``), so an under-reporting server still cannot
go below the text's own size. Each reply's shape is recorded (``TurnUsage.usage_shape``) and
the summary counts turns per shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class UsageShape(StrEnum):
    # Reasoning inside the output count (OpenAI's shape); the total, if sent, agrees.
    REASONING_IN_OUTPUT = "reasoning_in_output"
    # Reasoning only in the details: the total (or a reasoning count above the output) shows it.
    REASONING_OUTSIDE_OUTPUT = "reasoning_outside_output"
    # A total above every sum of the parts: the total is what the provider counted.
    TOTAL_ABOVE_PARTS = "total_above_parts"
    # Some count was missing or below the text's own floor: estimated with tiktoken.
    ESTIMATED = "estimated"


@dataclass(frozen=True)
class NormalizedUsage:
    """The counts the budget uses: ``output_tokens`` with every reasoning token in it (the
    OpenAI reading), ``counted`` the reply's whole count for the cap."""

    input_tokens: int
    output_tokens: int
    reasoning_tokens: int
    counted: int
    shape: UsageShape


def reasoning_outside_output(
    prompt: int, completion: int, reasoning: int, reported_total: int | None
) -> bool:
    """Whether the reported numbers show the reasoning tokens counted apart from the output:
    a total that holds prompt + completion + reasoning, or more reasoning than output (which
    cannot be a part of it). Without a total and with reasoning <= output, OpenAI's reading
    (inside) stands: nothing shows otherwise."""
    if reasoning <= 0:
        return False
    if reported_total is not None and reported_total >= prompt + completion + reasoning:
        return True
    return reasoning > completion


def normalize_usage(
    prompt: int,
    completion: int,
    reasoning: int,
    reported_total: int | None,
    *,
    estimated: bool = False,
) -> NormalizedUsage:
    """The count of one reply: max(total, prompt + completion, prompt + completion + reasoning
    when the reasoning is outside the completion). ``prompt`` and ``completion`` are already
    the believed counts (estimated where missing or below the text's floor)."""
    outside = reasoning_outside_output(prompt, completion, reasoning, reported_total)
    output = completion + (reasoning if outside else 0)
    counted = max(prompt + output, reported_total or 0)
    if estimated:
        shape = UsageShape.ESTIMATED
    elif counted > prompt + output:
        shape = UsageShape.TOTAL_ABOVE_PARTS
    elif outside:
        shape = UsageShape.REASONING_OUTSIDE_OUTPUT
    else:
        shape = UsageShape.REASONING_IN_OUTPUT
    return NormalizedUsage(
        input_tokens=prompt,
        output_tokens=output,
        reasoning_tokens=reasoning,
        counted=counted,
        shape=shape,
    )
