"""The per-conversation token budget: the 1,000,000-token cap and forced submission at 660,000.

Pure bookkeeping, no I/O. Spending is what the provider reports for each call, input plus
output (reasoning tokens are part of output), summed over the whole conversation; each call's
count is ``Usage.total``, read from the provider's own shape by agent/model/usage.py (reasoning
reported outside the completion is counted, and a larger reported total wins). The
budget also keeps a running estimate of the *next* prompt's size so that no request is sent
whose prompt alone would cross the cap, and so that ``max_output_tokens`` can be lowered to
keep prompt + output under it. That estimate is incremental: the previous request's input
tokens plus its output plus the tokens of messages appended since; the history is never
re-tokenised, so accounting costs the same at turn 2 and at turn 2,000.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from proctor.agent.model.base import Usage
from proctor.agent.results.records import TurnUsage

# The tokenizer used for estimates is rarely the provider's own; keep a margin so that a
# slightly larger real prompt still cannot carry the conversation past the cap.
ESTIMATE_MARGIN = 0.02
# Beyond the margin, each reply shows how far our estimate of what was appended fell short
# of the provider's count (another tokenizer, chat-template framing); later estimates are
# scaled by the worst shortfall seen, within these bounds. Until a reply has shown it, the
# worst case is assumed: on a real cap the first prompt is small, so that costs little room.
# Tiny appends are too noisy to learn from.
MAX_ESTIMATE_SCALE = 2.0
MIN_CALIBRATION_TOKENS = 32


@dataclass(frozen=True)
class RequestPlan:
    """What the next request may do, or why it must not be sent."""

    send: bool
    force_submission: bool
    max_output_tokens: int | None
    prompt_estimate: int
    stop_reason: str | None = None


class TokenBudget:
    def __init__(
        self,
        *,
        token_cap: int,
        force_submit_at: int,
        max_output_tokens: int | None = None,
        fixed_prompt_tokens: int = 0,
    ) -> None:
        if token_cap <= 0:
            raise ValueError("token_cap must be positive")
        self.token_cap = token_cap
        # At or above the cap, forcing can never happen; that simply disables it.
        self.force_submit_at = force_submit_at
        self.max_output_tokens = max_output_tokens
        self.used = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.reasoning_tokens = 0
        self.estimated = False
        self.turns: list[TurnUsage] = []
        self.forced_submission_turn: int | None = None
        self.cap_reached = False
        self.stop_reason: str | None = None
        # Tokens every request carries whatever the history (tool schemas).
        self._fixed_prompt_tokens = fixed_prompt_tokens
        # Size of the last prompt as the provider reported it, plus the reply appended to it.
        self._prompt_base = 0
        # Tokens of messages appended since the last request, estimated one message at a time.
        self._pending = 0
        # How much larger the provider's counts have been than our estimates; None until seen.
        self._scale: float | None = None
        # The estimated part of the last planned prompt and the reported base it sat on.
        self._planned: tuple[int, int] | None = None

    # -- prompt-size bookkeeping -------------------------------------------------------

    def add_message_tokens(self, tokens: int) -> None:
        """Account for a message appended to the history since the last request."""
        self._pending += max(0, tokens)

    @property
    def calibrated(self) -> bool:
        return self._scale is not None

    @property
    def estimate_scale(self) -> float:
        return MAX_ESTIMATE_SCALE if self._scale is None else self._scale

    def _estimated_part(self) -> int:
        # Before the first reply there is no provider count to build on.
        return self._pending + (0 if self.turns else self._fixed_prompt_tokens)

    def next_prompt_estimate(self) -> int:
        raw = self._prompt_base + math.ceil(self._estimated_part() * self.estimate_scale)
        return raw + int(raw * ESTIMATE_MARGIN)

    # -- thresholds --------------------------------------------------------------------

    @property
    def remaining(self) -> int:
        return max(0, self.token_cap - self.used)

    @property
    def submission_due(self) -> bool:
        """At or past the forcing threshold (and still under the cap)."""
        return self.force_submit_at <= self.used < self.token_cap

    @property
    def exhausted(self) -> bool:
        return self.used >= self.token_cap

    def plan_request(self) -> RequestPlan:
        prompt = self.next_prompt_estimate()
        self._planned = (self._estimated_part(), self._prompt_base)
        force = self.submission_due
        if self.exhausted:
            return self._stop(
                prompt, force, f"token cap reached: {self.used:,} of {self.token_cap:,} tokens used"
            )
        # A reply counts only if it ends strictly under the cap, so leave one token of room.
        room = self.token_cap - self.used - prompt - 1
        if room < 1:
            return self._stop(
                prompt,
                force,
                f"token cap: the next prompt (~{prompt:,} tokens) would cross the {self.token_cap:,}-token "
                f"cap with {self.used:,} already used",
            )
        ceiling = room if self.max_output_tokens is None else min(room, self.max_output_tokens)
        return RequestPlan(
            send=True, force_submission=force, max_output_tokens=ceiling, prompt_estimate=prompt
        )

    def _stop(self, prompt: int, force: bool, reason: str) -> RequestPlan:
        self.cap_reached = True
        self.stop_reason = reason
        return RequestPlan(False, force, None, prompt, reason)

    def _calibrate(self, usage: Usage) -> None:
        planned, self._planned = self._planned, None
        # An estimated usage is our own tokenizer's count: nothing to learn from it.
        if planned is None or usage.estimated:
            return
        estimated_part, base = planned
        if estimated_part >= MIN_CALIBRATION_TOKENS:
            shortfall = (usage.input_tokens - base) / estimated_part
            self._scale = min(MAX_ESTIMATE_SCALE, max(self._scale or 1.0, shortfall))

    # -- spending ----------------------------------------------------------------------

    def record_response(self, usage: Usage, *, forced: bool = False) -> TurnUsage:
        """Add one call's reported usage; returns the turn's row for the record."""
        turn_number = len(self.turns) + 1
        self.used += usage.total
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.reasoning_tokens += usage.reasoning_tokens
        self.estimated = self.estimated or usage.estimated
        if forced and self.forced_submission_turn is None:
            self.forced_submission_turn = turn_number
        self._calibrate(usage)
        # The reply becomes part of the next prompt. Its reasoning goes back only as
        # Responses API reasoning items, billed as the provider decides (often less than
        # their output count): counting all of it errs on the safe side of the cap.
        self._prompt_base = usage.total
        self._pending = 0
        if self.exhausted:
            self.cap_reached = True
            self.stop_reason = f"token cap reached: {self.used:,} of {self.token_cap:,} tokens used"
        row = TurnUsage(
            turn=turn_number,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            reasoning_tokens=usage.reasoning_tokens,
            estimated=usage.estimated,
            cumulative_tokens=self.used,
            forced_submission=forced,
            usage_shape=usage.shape,
        )
        self.turns.append(row)
        return row
