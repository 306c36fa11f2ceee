"""One FrontierMath conversation: prompt, tool turns under the token budget, until a submission.

The conversation ends when an answer is accepted for grading (submit_answer), when the
token cap is reached (at once), when the model endpoint fails for good or refuses the
conversation (agent/model/provider_outcome.py), or after ``max_turns`` as a last safety bound.
From the forcing threshold on, every turn is forced to call submit_answer (with the notice
before it), under every profile: the seed forces "the next message" from 660,000 tokens and
leaves avoiding the hard limit to the model, so a forced turn that brings no valid submission
is followed by another forced turn, never by the end of the sample. What the model is told
between turns, and which of several submissions counts, is the run's protocol profile
(``profiles.py``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from proctor.agent.model.base import ChatResponse, ModelError, record_message, reply_notes
from proctor.agent.model.budget import RequestPlan, TokenBudget
from proctor.agent.model.history import MessageHistory
from proctor.agent.model.tokens import estimate_message_tokens, estimate_tools_tokens
from proctor.agent.results.records import Outcome, ProviderRefusalRecord, SubmissionRecord, ToolCallRecord
from proctor.agent.tracks.base import SampleContext, model_failure
from proctor.agent.tracks.frontiermath.profiles import DEFAULT_PROTOCOL, ProtocolProfile, get_profile
from proctor.agent.tracks.frontiermath.provider_limits import output_ceiling_from_error
from proctor.agent.tracks.frontiermath.sandbox_calls import run_in_sandbox
from proctor.agent.tracks.frontiermath.submission import SubmissionResult, SubmissionRunner
from proctor.agent.tracks.frontiermath.tasks import FrontierMathTask
from proctor.agent.tracks.frontiermath.texts import budget_values, render
from proctor.agent.tracks.frontiermath.tools import (
    NOTHING_PRINTED,
    PYTHON_TOOL,
    SUBMIT_TOOL,
    ParsedCall,
    forced_tool_choice,
    format_python_result,
    parse_tool_call,
    tool_schemas,
)
from proctor.sandbox import SandboxError

DEFAULT_MAX_TURNS = 1000


@dataclass
class ConversationResult:
    outcome: Outcome
    error: str | None
    budget: TokenBudget
    transcript: list[dict[str, Any]] = field(default_factory=list)
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    submission: SubmissionRecord | None = None
    retries: int = 0
    provider_refusal: ProviderRefusalRecord | None = None
    # Why some requests of this sample went without the model's reasoning (its endpoint refused it).
    reasoning_not_carried: str | None = None


@dataclass
class _TurnResult:
    accepted: SubmissionResult | None = None
    rejected: SubmissionResult | None = None
    # The turn's last tool result is a python call that printed nothing.
    ended_silent: bool = False


class Conversation:
    def __init__(
        self,
        task: FrontierMathTask,
        ctx: SampleContext,
        prompt: str,
        *,
        reject_invalid: bool = False,
        profile: ProtocolProfile | None = None,
        max_turns: int = DEFAULT_MAX_TURNS,
        count_message: Callable[[dict[str, Any]], int] = estimate_message_tokens,
    ) -> None:
        if ctx.sandbox is None:
            raise ValueError("the FrontierMath track needs a sandbox")
        self.task = task
        self.ctx = ctx
        self.sandbox = ctx.sandbox
        self.config = ctx.config
        self.reject_invalid = reject_invalid
        self.profile = profile or get_profile(DEFAULT_PROTOCOL)
        self.max_turns = max_turns
        self.count_message = count_message
        sandbox_config = self.config.sandbox
        self.tools = tool_schemas(sandbox_config.timeout_s, sandbox_config.answer_timeout_s)
        budget_config = self.config.budget
        self.budget = TokenBudget(
            token_cap=budget_config.token_cap,
            force_submit_at=budget_config.force_submit_at,
            max_output_tokens=budget_config.max_output_tokens,
            fixed_prompt_tokens=estimate_tools_tokens(self.tools),
        )
        self.submissions = SubmissionRunner(self.sandbox, sandbox_config, ctx.events)
        # Measures and encodes each message once, not the whole history every turn.
        self.messages: list[dict[str, Any]] = MessageHistory()
        self.transcript: list[dict[str, Any]] = []
        self.tool_records: list[ToolCallRecord] = []
        self.retries = 0
        self.reasoning_not_carried: str | None = None
        self._append({"role": "user", "content": prompt}, turn=0, kind="prompt")

    def _append(self, message: dict[str, Any], *, turn: int, count: bool = True, **extra: Any) -> None:
        self.messages.append(message)
        # The record keeps reasoning items size-capped (``extra``), not as sent.
        self.transcript.append({**record_message(message), "turn": turn, **extra})
        if count:
            # Incremental: only the new message is tokenised, never the history.
            self.budget.add_message_tokens(self.count_message(message))

    def _finish(
        self,
        outcome: Outcome,
        error: str | None,
        submission: SubmissionResult | None = None,
        *,
        refusal: ProviderRefusalRecord | None = None,
    ) -> ConversationResult:
        return ConversationResult(
            provider_refusal=refusal,
            outcome=outcome,
            error=error,
            budget=self.budget,
            transcript=self.transcript,
            tool_calls=self.tool_records,
            submission=submission.record if submission else None,
            retries=self.retries,
            reasoning_not_carried=self.reasoning_not_carried,
        )

    def _no_answer(self, reason: str, rejected: SubmissionResult | None) -> ConversationResult:
        if rejected is not None:
            return self._finish(
                Outcome.INVALID_SUBMISSION,
                f"{reason}; the last submission was rejected: {rejected.error}",
                rejected,
            )
        return self._finish(Outcome.NO_SUBMISSION, reason)

    def _budget_text(self, template: str) -> str:
        budget = self.budget
        # One explicit pass over the placeholders: a template may be the user's (texts.py).
        return render(template, budget_values(budget.used, budget.force_submit_at, budget.token_cap))

    async def run(self) -> ConversationResult:
        rejected: SubmissionResult | None = None
        profile = self.profile
        for turn in range(1, self.max_turns + 1):
            if self.budget.submission_due:
                notice = self._budget_text(profile.forced_notice)
                self._append({"role": "user", "content": notice}, turn=turn, kind="forced_submission")
            plan = self.budget.plan_request()
            if not plan.send:
                return self._no_answer(plan.stop_reason or "token cap reached", rejected)
            self.ctx.events.model_call_started(turn)
            try:
                response = await self._complete(plan)
            except ModelError as exc:
                failure = model_failure(exc)
                if failure.refusal is None:
                    return self._finish(failure.outcome, f"model error: {failure.error}")
                # The provider refused the conversation: the model's outcome, scored.
                return self._finish(failure.outcome, failure.error, refusal=failure.refusal)
            self._record_reply(response, turn, plan.force_submission)
            self.ctx.events.turn_finished(turn, self.budget.used)
            if self.budget.exhausted:
                # At the cap the conversation ends at once; this reply's tool calls are not run.
                return self._no_answer(self.budget.stop_reason or "token cap reached", rejected)
            if not response.tool_calls:
                # From the threshold on the forced notice comes next; a reminder to keep working
                # with the python tool would contradict it ("submit now").
                if profile.no_tool_call_nudge is not None and not self.budget.submission_due:
                    self._append(
                        {"role": "user", "content": profile.no_tool_call_nudge}, turn=turn, kind="nudge"
                    )
            else:
                result = await self._run_tool_calls(response, turn)
                if result.accepted is not None:
                    return self._finish(result.accepted.outcome, result.accepted.error, result.accepted)
                rejected = result.rejected or rejected
                if result.ended_silent and not self.budget.submission_due and profile.empty_output_help:
                    self._append(
                        {"role": "user", "content": profile.empty_output_help}, turn=turn, kind="help"
                    )
            # Past the threshold the forced notice (next turn) takes the status message's place.
            if profile.status_message is not None and not self.budget.submission_due:
                status = self._budget_text(profile.status_message)
                self._append({"role": "user", "content": status}, turn=turn, kind="status")
        return self._no_answer(f"stopped after {self.max_turns} turns without a submission", rejected)

    async def _complete(self, plan: RequestPlan) -> ChatResponse:
        tool_choice = forced_tool_choice() if plan.force_submission else "auto"
        try:
            return await self.ctx.model.complete(
                self.messages,
                tools=self.tools,
                tool_choice=tool_choice,
                max_output_tokens=plan.max_output_tokens,
            )
        except ModelError as exc:
            ceiling = output_ceiling_from_error(str(exc))
            if ceiling is None or plan.max_output_tokens is None or ceiling >= plan.max_output_tokens:
                raise
        # The room under the cap exceeded the model's own maximum, or what its context holds
        # after this prompt: remember it, ask again once (a second refusal is the outcome).
        self.budget.max_output_tokens = min(ceiling, self.budget.max_output_tokens or ceiling)
        return await self.ctx.model.complete(
            self.messages, tools=self.tools, tool_choice=tool_choice, max_output_tokens=ceiling
        )

    def _record_reply(self, response: ChatResponse, turn: int, forced: bool) -> None:
        self.retries += response.retries
        self.reasoning_not_carried = self.reasoning_not_carried or response.reasoning_not_carried
        usage = self.budget.record_response(response.usage, forced=forced)
        self.ctx.events.tokens_used(response.usage.total)
        extra: dict[str, Any] = {"usage": usage.model_dump(), "finish_reason": response.finish_reason}
        if forced:
            extra["forced_submission"] = True
        if response.reasoning:
            extra["reasoning"] = response.reasoning
        extra.update(reply_notes(response))
        message = response.as_message()
        if message["content"] is None:
            # Some OpenAI-compatible servers (llama.cpp's) refuse a null content in the history.
            message["content"] = ""
        # The reply's size is already in the provider's count: not re-estimated. Its
        # reasoning items, when it has any, go back with it next turn; the provider counts
        # them in that request's input tokens.
        self._append(message, turn=turn, count=False, **extra)

    async def _run_tool_calls(self, response: ChatResponse, turn: int) -> _TurnResult:
        parsed = [parse_tool_call(call) for call in response.tool_calls]
        submit_indexes = [i for i, p in enumerate(parsed) if p.call.name == SUBMIT_TOOL and p.error is None]
        submit_index: int | None = None
        if submit_indexes:
            submit_index = submit_indexes[0 if self.profile.submission_pick == "first" else -1]
        jobs = [self._run_one(p, turn, is_submission=(i == submit_index)) for i, p in enumerate(parsed)]
        # Concurrently; results come back (and are appended) in call order.
        outcomes = await asyncio.gather(*jobs)
        result = _TurnResult()
        for index, (record, submission) in enumerate(outcomes):
            self.tool_records.append(record)
            message = {"role": "tool", "tool_call_id": record.call_id, "content": record.result}
            extra: dict[str, Any] = {}
            if index in submit_indexes:
                # Which well-formed submission the profile graded, for the reader of the record.
                extra["graded_submission"] = index == submit_index
            self._append(
                message,
                turn=turn,
                name=record.name,
                duration_s=record.duration_s,
                truncated=record.truncated,
                error=record.error,
                **extra,
            )
            result.ended_silent = record.name == PYTHON_TOOL and record.error is None and record.result == ""
            if submission is None:
                continue
            if submission.outcome is Outcome.INVALID_SUBMISSION and self.reject_invalid:
                result.rejected = submission
            else:
                result.accepted = submission
        return result

    async def _run_one(
        self, parsed: ParsedCall, turn: int, *, is_submission: bool
    ) -> tuple[ToolCallRecord, SubmissionResult | None]:
        call = parsed.call
        record = ToolCallRecord(
            turn=turn,
            call_id=call.id,
            name=call.name,
            raw_arguments=call.arguments,
            deviations=call.deviations,
        )
        started = time.monotonic()
        submission: SubmissionResult | None = None
        if parsed.error is not None:
            record.error = record.result = parsed.error
        elif call.name == PYTHON_TOOL:
            await self._run_python(parsed.code or "", record)
        elif is_submission:
            submission = await self.submissions.evaluate(
                parsed.code or "", self.task, turn=turn, enforce_checks=self.reject_invalid
            )
            record.sandbox = {"outcome": submission.outcome.value}
            if submission.outcome is Outcome.INVALID_SUBMISSION and self.reject_invalid:
                record.error = submission.error
                record.result = (
                    f"Your submission was rejected: {submission.error}. Fix these problems and call "
                    "submit_answer again."
                )
            else:
                record.result = self.profile.submission_reply
        else:
            record.result = self.profile.other_submission_reply
        record.duration_s = time.monotonic() - started
        return record, submission

    async def _run_python(self, code: str, record: ToolCallRecord) -> None:
        sandbox_config = self.config.sandbox
        try:
            result = await run_in_sandbox(
                self.sandbox, self.ctx.events, code, timeout=sandbox_config.timeout_s
            )
        except SandboxError as exc:
            # The sandbox failed, not the program: say so and let the model try again.
            record.error = f"sandbox failure: {exc}"
            record.result = f"Error: the sandbox failed to run this call ({exc}). Please try again."
            return
        profile = self.profile
        reply = format_python_result(
            result,
            timeout_s=sandbox_config.timeout_s,
            max_chars=sandbox_config.tool_output_chars,
            stderr_first=profile.stderr_first,
            max_bytes=profile.tool_output_bytes,
            # With a separate help message the tool result itself stays empty, as in the source.
            empty_text="" if profile.empty_output_help is not None else NOTHING_PRINTED,
        )
        record.result = reply.text
        record.truncated = reply.truncated
        # The output itself is in ``result`` (as the model saw it); keep the rest, not a second copy.
        details = result.to_dict()
        details["stdout_chars"] = len(details.pop("stdout"))
        details["stderr_chars"] = len(details.pop("stderr"))
        record.sandbox = details
