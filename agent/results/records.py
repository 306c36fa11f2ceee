"""What one finished sample leaves in ``samples.jsonl``.

Data flows one way: task -> conversation -> submission -> verdict -> record. Every
track fills a :class:`SampleRecord`; the store, summaries and reports read only this.
"""

from __future__ import annotations

import datetime as dt
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field


class Outcome(StrEnum):
    CORRECT = "correct"
    INCORRECT = "incorrect"
    ANSWER_ERROR = "answer_error"
    ANSWER_TIMEOUT = "answer_timeout"
    VERIFY_ERROR = "verify_error"
    INVALID_SUBMISSION = "invalid_submission"
    NO_SUBMISSION = "no_submission"
    # Judge-based tracks: the judge's reply could not be parsed even after retries.
    JUDGE_ERROR = "judge_error"
    # The model endpoint failed for good (auth, quota, retries exhausted): an error, re-run.
    MODEL_ERROR = "model_error"
    # The provider refused the model's own conversation (context overflow, policy refusal,
    # content filter): the model's outcome, scored 0 and kept (agent/model/provider_outcome.py).
    PROVIDER_REFUSAL = "provider_refusal"
    # A deterministic scorer (EED) ran past its hard time limit.
    SCORER_TIMEOUT = "scorer_timeout"
    # Proctor itself raised while running the sample; the exception is in ``error``.
    HARNESS_ERROR = "harness_error"


# Outcomes that say nothing about the model's ability; summaries count them apart.
ERROR_OUTCOMES = frozenset(
    {Outcome.JUDGE_ERROR, Outcome.MODEL_ERROR, Outcome.VERIFY_ERROR, Outcome.HARNESS_ERROR}
)
# An error says nothing about the model, so it is not a result: --resume runs the sample again
# (after a fixed endpoint, engine or bug) and the new record supersedes the old one.
RERUN_ON_RESUME = ERROR_OUTCOMES


# The one timestamp format of records (started_at, finished_at) and of run.json's sessions.
def utc_now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


# Counts (tokens, turns, trials, retries, sizes) are never negative, and no run reaches 2**63
# (int64, what every JSON reader carries): JSON holds integers of any size, and one past float's
# range in an edited run directory overflowed the summary's means and the report's plots.
MAX_STORED_COUNT = 2**63 - 1
Count = Annotated[int, Field(ge=0, le=MAX_STORED_COUNT)]


class _Stored(BaseModel):
    # NaN and infinities are written as strings so they read back (JSON has no spelling for them).
    model_config = ConfigDict(ser_json_inf_nan="strings")


class TurnUsage(_Stored):
    turn: Count
    input_tokens: Count
    output_tokens: Count
    reasoning_tokens: Count = 0
    estimated: bool = False
    cumulative_tokens: Count
    forced_submission: bool = False
    # How the provider reported this turn's usage (agent/model/usage.py, ``UsageShape``);
    # None in records from before it was recorded.
    usage_shape: str | None = None


class ToolCallRecord(_Stored):
    turn: Count
    call_id: str
    name: str
    raw_arguments: str
    # Where the call left the OpenAI tool-call shape (no id, arguments not a string, ...);
    # the ids and names above are then the ones Proctor used in the conversation.
    deviations: list[str] = Field(default_factory=list)
    error: str | None = None
    result: str = ""
    truncated: bool = False
    duration_s: float = 0.0
    sandbox: dict[str, Any] | None = None

    @property
    def ran_in_sandbox(self) -> bool:
        """Whether this call executed code; a submit call's ``sandbox`` may hold only its outcome."""
        return self.sandbox is not None and "exit_code" in self.sandbox


class SubmissionRecord(_Stored):
    code: str
    turn: Count | None = None
    check_problems: list[str] = Field(default_factory=list)
    value_type: str | None = None
    value_repr: str | None = None
    answer_exec: dict[str, Any] | None = None
    verify_exec: dict[str, Any] | None = None
    verification: str | None = None
    # The task's expected answer contains a float: an exact answer type deserves an exact reference.
    reference_inexact: bool = False
    # What the answer process said of its own timing (answer_s, encode_s): untrusted, shown for
    # the reader; the limit itself is the sandbox's wall clock (answer_exec.duration_s).
    reported_timing: dict[str, float] = Field(default_factory=dict)


class JudgeRecord(_Stored):
    decided_by: str  # "precheck" | "judge"
    model: str | None = None
    # The exact prompt sent on every attempt (each attempt sends the same one), for audit.
    # Stored whole up to ``proctor.agent.text.capped_text.CAPPED_TEXT_CHARS``; longer text keeps its head and
    # tail around a marker giving the omitted length and the whole text's SHA-256.
    prompt: str | None = None
    # Length and SHA-256 (UTF-8) of the whole prompt, stored or not: whether ``prompt`` is whole.
    prompt_chars: Count | None = None
    prompt_sha256: str | None = None
    replies: list[str] = Field(default_factory=list)
    verdict: str | None = None  # "CORRECT" | "INCORRECT" | points as text
    points: float | None = None
    parse_error: str | None = None
    # What the deterministic pre-check concluded ("settled correct by numeric", "deferred ...").
    precheck: str | None = None
    # The judge's own token use over all its attempts (not counted in the sample's totals).
    input_tokens: Count = 0
    output_tokens: Count = 0
    # When the judge gave no verdict on the answer: the same prompt with a placeholder answer,
    # and what the judge said of it ({"answer", "answer_error", "replies", "verdict", "error"?,
    # "asked_again"? when the endpoint had failed on the answer}). A verdict there puts the
    # blame on the answer (``incorrect``); none puts it on the judge (``judge_error``).
    answer_probe: dict[str, Any] | None = None


class PromptSectionMatch(_Stored):
    """A line of the answer that imitates a section marker or label of the judge prompt."""

    marker: str  # the prompt's own text (``***``, ``The reference answer:``, ``VERDICT:``)
    text: str  # the answer's line, at most 200 characters


class ReferenceRecord(_Stored):
    """What the sample was graded against, so its view can show it beside the answer.

    ``kind``: ``answer`` (Olympiad, PHYBench: the reference answer), ``rubric`` (Research),
    ``verify`` (FrontierMath: the task's verify() source), ``expected`` (FrontierMath: the
    expected value's source, compared by type, with ``tolerance`` when numeric). The text is
    capped like the judge prompt (``proctor.agent.text.capped_text``).
    """

    kind: str
    text: str
    tolerance: float | None = None


class EEDRecord(_Stored):
    score: float
    relative_distance: float | None = None
    distance: float | None = None
    reference_size: Count | None = None
    answer_size: Count | None = None
    status: str = "ok"
    extracted_answer: str | None = None


class TextReplacements(_Stored):
    """Text the store could not encode as UTF-8 and replaced (rule in docs/runs.md)."""

    rule: str = "lone surrogate -> \\uXXXX"
    count: Count
    # JSON paths of the first fields where a replacement happened.
    fields: list[str] = Field(default_factory=list)


class RescoreNote(_Stored):
    """Set by ``proctor rescore``: whether this sample was graded again, and what it was before."""

    rescored: bool
    # Why the sample was carried over unchanged (no stored answer to grade, ...).
    reason: str | None = None
    previous_outcome: Outcome
    previous_score: float
    previous_success: bool
    previous_error: str | None = None
    previous_judge_model: str | None = None


class ProviderRefusalRecord(_Stored):
    """What the provider said when it refused the conversation (``provider_refusal``): its
    kind (context_overflow, refused, content_filter), HTTP status, code and message, the text
    bounded and stripped of control characters (the endpoint may be hostile)."""

    kind: str
    status: int
    code: str | None = None
    message: str = ""


class SampleRecord(_Stored):
    run_id: str
    track: str
    task_id: str
    trial: Count
    model: str
    subject: str | None = None
    reasoning_effort: str | None = None
    outcome: Outcome
    # Binary tracks: 1.0/0.0. Research: points earned (0..10). Always paired with ``success``.
    score: float = 0.0
    success: bool = False
    error: str | None = None
    input_tokens: Count = 0
    output_tokens: Count = 0
    reasoning_tokens: Count = 0
    total_tokens: Count = 0
    tokens_estimated: bool = False
    turns: list[TurnUsage] = Field(default_factory=list)
    forced_submission_turn: Count | None = None
    cap_reached: bool = False
    transcript: list[dict[str, Any]] = Field(default_factory=list)
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    submission: SubmissionRecord | None = None
    judge: JudgeRecord | None = None
    eed: EEDRecord | None = None
    # What the sample was graded against (reference answer, rubric, verify() source).
    reference: ReferenceRecord | None = None
    sandbox_image: str | None = None
    # Retries of the answering model's calls and of the judge's, counted by the runner: every
    # retry, those of a call that finally failed included.
    retries: Count = 0
    judge_retries: Count = 0
    started_at: str
    finished_at: str
    duration_s: float
    # provider_refusal only: what the provider said.
    provider_refusal: ProviderRefusalRecord | None = None
    # Set when this model's endpoint refused reasoning carried across turns during (or before)
    # this sample, so some of its requests went without the reasoning: the endpoint's reason.
    reasoning_not_carried: str | None = None
    # harness_error only: the end of the traceback, for whoever fixes the harness.
    harness_traceback: str | None = None
    # Set when the store had to replace text that UTF-8 cannot hold.
    unencodable_text: TextReplacements | None = None
    # Records of a run written by `proctor rescore` (docs/runs.md, "Re-scoring a run").
    rescore: RescoreNote | None = None
    # Judge tracks: the answer the judge was given imitates the judge prompt's own separators,
    # labels or keywords (agent/judge/forgery.py). A flag for the auditor, not a grade.
    answer_mimics_prompt_sections: bool = False
    prompt_section_matches: list[PromptSectionMatch] = Field(default_factory=list)

    @property
    def key(self) -> tuple[str, int]:
        return (self.task_id, self.trial)
