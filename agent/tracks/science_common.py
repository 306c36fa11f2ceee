"""What the Olympiad, Research and PHYBench tracks share: asking the model, keeping the record.

These tracks ask the model once (or, with the optional python tool, run a short tool loop) and
then grade the final response. ``SampleLog`` collects everything the record needs while that
happens: transcript, per-turn usage, retries, errors. ``finish`` turns it into a
:class:`SampleRecord`.
"""

from __future__ import annotations

import functools
import re
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from proctor.agent.inputs.config import (
    PAPER_ANSWER_EFFORT,
    PAPER_JUDGE,
    PAPER_JUDGE_EFFORT,
    PAPER_TRIALS,
    RunConfig,
    paper_answer_effort,
)
from proctor.agent.judge.forgery import SectionMatch
from proctor.agent.judge.prompts import ANSWER_PLACEHOLDERS, fill_template, load_template
from proctor.agent.model.base import ChatResponse, ModelError, Usage, record_message, reply_notes
from proctor.agent.results.records import (
    EEDRecord,
    JudgeRecord,
    Outcome,
    PromptSectionMatch,
    ProviderRefusalRecord,
    ReferenceRecord,
    SampleRecord,
    ToolCallRecord,
    TurnUsage,
)
from proctor.agent.text.capped_text import capped
from proctor.agent.tracks.base import SampleContext, model_failure

# No two adjacent parts may match the same text, or the regex backtracks: with ``\s*\**\s*`` a
# reply of 2,000 newlines took 34 s and one of a million spaces did not finish. Blanks only, never
# newlines, and an optional run of ``*`` always followed by its own blanks.
FINAL_ANSWER_MARKER = re.compile(
    r"^[ \t]*(?:\*+[ \t]*)?FINAL ANSWER[ \t]*(?:\*+[ \t]*)?:[ \t]*(?:\*+)?(.*)$", re.IGNORECASE | re.MULTILINE
)


# Boxes that ``boxed_contents`` does not read but LaTeX and MathJax draw all the same: a box
# whose argument is one token (``\\boxed 6``, ``\\boxed6``) and the other box commands.
_UNREAD_BOX = re.compile(
    r"\\boxed(?![A-Za-z])(?!\s*\{)|\\(?:fbox|framebox|bbox|colorbox|fcolorbox)(?![A-Za-z])"
)
# More boxed answers than this are not one committed answer (the scan reads at most this many).
MAX_BOXES = 64


def marked_final_answer(response: str | None) -> str | None:
    """The text after the last ``FINAL ANSWER:`` marker, up to the end of the response."""
    if not response:
        return None
    matches = list(FINAL_ANSWER_MARKER.finditer(response))
    return _tail_after(response, matches[-1]) if matches else None


def _tail_after(response: str, marker: re.Match[str]) -> str | None:
    return (marker.group(1) + response[marker.end() :]).strip().strip("*").strip() or None


@functools.lru_cache(maxsize=8)
def _run_template(path: str) -> str:
    return load_template(Path(path), ANSWER_PLACEHOLDERS)


def render_answer_prompt(question: str, track_template: str | None, ctx: SampleContext) -> str:
    """The model's prompt: the run config's ``prompt_template`` if set, else the track's own.

    Without any template the problem text alone is the prompt.
    """
    override = ctx.config.prompt_template
    template = _run_template(str(override)) if override is not None else track_template
    return question if template is None else fill_template(template, {"problem": question})


def final_answer_of(response: str | None) -> str | None:
    """The answer the pre-check compares: the ``FINAL ANSWER:`` section, else the ``\\boxed{}``.

    Every candidate the response marks must be the same answer: all ``FINAL ANSWER:`` lines and
    all ``\\boxed{}`` contents (a box around the marked answer is the same answer). Several
    different ones are several candidates, so there is no single final answer: the pre-check
    defers, and the judge sees the whole response.
    """
    if not response:
        return None
    from proctor.agent.judge.precheck import normalize_answer
    from proctor.agent.text.answer_shape import boxed_contents, distinct

    markers = list(FINAL_ANSWER_MARKER.finditer(response))
    if _marker_shaped_lines(response) > len(markers):
        return None  # a marker the strict search does not read (say, after a U+2028) may hold another
    # A marker's answer is its whole section, up to the next marker: comparing only the rest of
    # each marker's line let "FINAL ANSWER:\n5 ... FINAL ANSWER:\n6" through as the single "6".
    ends = [marker.start() for marker in markers[1:]] + [len(response)]
    sections = {
        response[marker.start(1) : end].strip().strip("*").strip()
        for marker, end in zip(markers, ends, strict=False)  # no markers: one end, no section
    }
    if len(sections) > 1:
        return None
    marked = _tail_after(response, markers[-1]) if markers else None
    if _UNREAD_BOX.search(response):
        return None  # a box the scan below cannot read may hold another candidate
    every_box = boxed_contents(response, limit=MAX_BOXES)
    if len(every_box) == MAX_BOXES:
        return None  # the scan stopped: a box after these may hold another candidate
    boxes = distinct(every_box)
    if marked is None:
        return boxes[0] or None if len(boxes) == 1 else None
    if boxes:
        marked_boxes = boxed_contents(marked)
        committed = normalize_answer(marked_boxes[0] if len(marked_boxes) == 1 else marked)
        if any(normalize_answer(box) != committed for box in boxes):
            return None  # "\\boxed{6} ... FINAL ANSWER: 5"
    return marked


# Every character some reader draws as a line break; a "FINAL ANSWER:" after any of them looks
# like a marker even though the strict search above reads lines at "\n" only.
_VISUAL_BREAKS = re.compile("[\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
# On a skeleton (agent/judge/lookalike.py). No part may match "\n", so each line start scans
# only its own line: linear in the response.
_MARKER_SHAPED = re.compile(r"^[^\w\n]*final[^\w\n]*answer[^\w\n]*:", re.MULTILINE)


def _marker_shaped_lines(response: str) -> int:
    """Lines that read as a ``FINAL ANSWER:`` marker to a person, in any spelling.

    Case, markup, full-width or look-alike letters, other colons, and every kind of line break
    count. There are at least as many as strict markers; more means a marker the strict search
    missed, which may commit to another answer.
    """
    from proctor.agent.judge.lookalike import skeleton

    return sum(1 for _ in _MARKER_SHAPED.finditer(skeleton(_VISUAL_BREAKS.sub("\n", response))))


@dataclass(frozen=True)
class Verdict:
    """How a final response was graded: what ``SampleLog.finish`` records beside the conversation.

    Produced from the response alone (and the task), so ``proctor rescore`` grades a stored
    response exactly as the run did."""

    outcome: Outcome
    score: float = 0.0
    success: bool = False
    error: str | None = None
    judge: JudgeRecord | None = None
    eed: EEDRecord | None = None
    prompt_sections: tuple[SectionMatch, ...] = ()

    def section_fields(self) -> dict[str, Any]:
        """The record's forgery flag and matched lines (agent/judge/forgery.py)."""
        return {
            "answer_mimics_prompt_sections": bool(self.prompt_sections),
            "prompt_section_matches": [
                PromptSectionMatch(marker=m.marker, text=m.text) for m in self.prompt_sections
            ],
        }


@dataclass
class SampleLog:
    """Everything one sample produces before it is graded."""

    track: str
    task_id: str
    trial: int
    subject: str | None
    ctx: SampleContext
    # What the answer is graded against; every outcome's record carries it, for the reader.
    reference: ReferenceRecord | None = None
    transcript: list[dict[str, Any]] = field(default_factory=list)
    turns: list[TurnUsage] = field(default_factory=list)
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    retries: int = 0
    sandbox_image: str | None = None
    # Why some of this sample's requests went without the model's reasoning.
    reasoning_not_carried: str | None = None
    started_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat())
    started_monotonic: float = field(default_factory=time.monotonic)

    @property
    def total_tokens(self) -> int:
        return self.turns[-1].cumulative_tokens if self.turns else 0

    def add_response(self, response: ChatResponse, *, forced: bool = False) -> None:
        usage: Usage = response.usage
        self.retries += response.retries
        self.reasoning_not_carried = self.reasoning_not_carried or response.reasoning_not_carried
        self.turns.append(
            TurnUsage(
                turn=len(self.turns) + 1,
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                reasoning_tokens=usage.reasoning_tokens,
                estimated=usage.estimated,
                cumulative_tokens=self.total_tokens + usage.total,
                forced_submission=forced,
                usage_shape=usage.shape,
            )
        )
        message = record_message(response.as_message())
        if response.reasoning:
            message["reasoning"] = response.reasoning
        if response.finish_reason:
            message["finish_reason"] = response.finish_reason
        message.update(reply_notes(response))
        self.transcript.append(message)
        # Retries reach the progress display through the client's own on_retry callback.
        self.ctx.events.tokens_used(usage.total)
        self.ctx.events.turn_finished(len(self.turns), self.total_tokens)

    def finish_with(self, verdict: Verdict) -> SampleRecord:
        record = self.finish(
            verdict.outcome,
            score=verdict.score,
            success=verdict.success,
            error=verdict.error,
            judge=verdict.judge,
            eed=verdict.eed,
        )
        return record.model_copy(update=verdict.section_fields())

    def finish_failed(self, error: ModelFailed) -> SampleRecord:
        """The model failed for good: ``provider_refusal`` (scored) when the provider refused
        the conversation, else ``model_error`` (an error, re-run by --resume)."""
        failure = model_failure(error)
        if failure.refusal is not None:
            return self.finish(failure.outcome, error=failure.error, provider_refusal=failure.refusal)
        return self.finish(failure.outcome, error=f"model failed: {error}")

    def finish(
        self,
        outcome: Outcome,
        *,
        score: float = 0.0,
        success: bool = False,
        error: str | None = None,
        judge: JudgeRecord | None = None,
        eed: EEDRecord | None = None,
        provider_refusal: ProviderRefusalRecord | None = None,
    ) -> SampleRecord:
        return SampleRecord(
            run_id=self.ctx.run_id,
            track=self.track,
            task_id=self.task_id,
            trial=self.trial,
            model=self.ctx.model_name,
            subject=self.subject,
            reasoning_effort=self.ctx.reasoning_effort,
            outcome=outcome,
            score=score,
            success=success,
            error=error,
            input_tokens=sum(t.input_tokens for t in self.turns),
            output_tokens=sum(t.output_tokens for t in self.turns),
            reasoning_tokens=sum(t.reasoning_tokens for t in self.turns),
            total_tokens=self.total_tokens,
            tokens_estimated=any(t.estimated for t in self.turns),
            turns=self.turns,
            transcript=self.transcript,
            tool_calls=self.tool_calls,
            judge=judge,
            eed=eed,
            reference=self.reference,
            sandbox_image=self.sandbox_image,
            retries=self.retries,
            provider_refusal=provider_refusal,
            reasoning_not_carried=self.reasoning_not_carried,
            started_at=self.started_at,
            finished_at=datetime.now(UTC).isoformat(),
            duration_s=time.monotonic() - self.started_monotonic,
        )


def reference_of(kind: str, text: str) -> ReferenceRecord:
    """The reference answer or rubric as the record keeps it (capped like the judge prompt)."""
    return ReferenceRecord(kind=kind, text=capped(text))


class ModelFailed(Exception):
    """The answering model failed for good; the sample ends as ``model_error``, or as
    ``provider_refusal`` when the provider refused the conversation (``SampleLog.finish_failed``)."""


async def ask_model_once(log: SampleLog, prompt: str) -> str:
    """One user message, one reply: the tool-free protocol of the science tracks.

    Returns the reply's text ("" when the model returned none). Raises :class:`ModelFailed`.
    """
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    log.transcript.extend(messages)
    log.ctx.events.model_call_started(len(log.turns) + 1)
    try:
        response = await log.ctx.model.complete(
            messages, max_output_tokens=log.ctx.config.budget.max_output_tokens
        )
    except ModelError as exc:
        raise ModelFailed(str(exc) or type(exc).__name__) from exc
    log.add_response(response)
    return response.content or ""


def paper_protocol_settings(config: RunConfig) -> dict[str, Any]:
    """The FrontierScience protocol values this run uses, beside the paper's, for run.json."""
    judge = config.judge
    return {
        "trials": config.trials,
        "answer_reasoning_effort": {m.name: m.reasoning_effort for m in config.models},
        "judge": None if judge is None else judge.name,
        "judge_reasoning_effort": None if judge is None else judge.reasoning_effort,
        "paper": {
            "trials": PAPER_TRIALS[config.track],
            "answer_reasoning_effort": PAPER_ANSWER_EFFORT,
            # What the paper used for each of this run's models: xhigh for GPT-5.2, none for a
            # non-reasoning model (agent/inputs/config.py, paper_answer_effort).
            "answer_reasoning_effort_by_model": {m.name: paper_answer_effort(m.name) for m in config.models},
            "judge": PAPER_JUDGE,
            "judge_reasoning_effort": PAPER_JUDGE_EFFORT,
        },
    }
