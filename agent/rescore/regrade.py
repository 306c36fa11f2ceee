"""Per track: which stored records hold an answer, and how to grade that answer again.

The grading itself is the track's own code, so a re-scored sample is graded exactly as a run
grades it: ``grade_response`` for the science tracks (the judge, or EED for PHYBench) and the
submission pipeline for FrontierMath, whose ``answer()`` source runs only in the sandbox.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proctor.agent.errors import UserError
from proctor.agent.inputs.config import SandboxConfig
from proctor.agent.model.base import ModelClient
from proctor.agent.results.records import Outcome, SampleRecord, SubmissionRecord
from proctor.agent.tracks.base import RunEvents, Track
from proctor.agent.tracks.frontiermath.submission import SubmissionRunner
from proctor.agent.tracks.frontiermath.track import FrontierMathTrack
from proctor.agent.tracks.frontiermath.track import reference_of as frontiermath_reference
from proctor.agent.tracks.olympiad import OlympiadTrack
from proctor.agent.tracks.phybench import PhybenchTrack
from proctor.agent.tracks.research import ResearchTrack
from proctor.agent.tracks.science_common import Verdict, reference_of
from proctor.sandbox import Sandbox


@dataclass(frozen=True)
class NotRescored:
    """The record holds nothing to grade: it is carried over as it was."""

    reason: str


@dataclass
class RegradeContext:
    judge: ModelClient | None
    sandbox: Sandbox | None
    sandbox_config: SandboxConfig
    events: RunEvents


# The record fields a re-grade replaces; everything else (conversation, tokens) is the run's.
Update = dict[str, Any]


class Regrader(ABC):
    needs_judge = False
    needs_sandbox = False
    # The run's track: its grading, and the reference every record carries (reference_for).
    track: Track

    @abstractmethod
    def stored_answer(self, record: SampleRecord, path: Path, line: int) -> Any:
        """The answer to grade again, or :class:`NotRescored`; bad stored data raises UserError."""

    @abstractmethod
    async def regrade(self, task: Any, answer: Any, ctx: RegradeContext) -> Update:
        """Grade ``answer`` for ``task``; never raises for judge or sandbox failures."""


# Outcomes a science track reaches only after the model gave a final response.
_SCIENCE_GRADED = frozenset(
    {Outcome.CORRECT, Outcome.INCORRECT, Outcome.JUDGE_ERROR, Outcome.NO_SUBMISSION, Outcome.SCORER_TIMEOUT}
)


def final_response(record: SampleRecord, path: Path, line: int) -> str | NotRescored:
    """The model's last reply in the stored transcript: what the track graded."""
    for index in range(len(record.transcript) - 1, -1, -1):
        message = record.transcript[index]
        if message.get("role") != "assistant":
            continue
        content = message.get("content")
        if content is None:
            return ""
        if not isinstance(content, str):
            raise UserError(f"{path}: line {line}: field 'transcript.{index}.content': not text")
        return content
    return NotRescored("no reply of the model in the stored transcript")


def _verdict_update(verdict: Verdict) -> Update:
    return {
        "outcome": verdict.outcome,
        "score": verdict.score,
        "success": verdict.success,
        "error": verdict.error,
        "judge": verdict.judge,
        "eed": verdict.eed,
        **verdict.section_fields(),
    }


class ScienceRegrader(Regrader):
    track: OlympiadTrack | ResearchTrack | PhybenchTrack

    def __init__(self, track: OlympiadTrack | ResearchTrack | PhybenchTrack) -> None:
        self.track = track
        self.needs_judge = not isinstance(track, PhybenchTrack)

    def stored_answer(self, record: SampleRecord, path: Path, line: int) -> Any:
        if record.outcome not in _SCIENCE_GRADED:
            return NotRescored(f"{record.outcome.value}: the model gave no response to grade")
        return final_response(record, path, line)

    async def regrade(self, task: Any, answer: Any, ctx: RegradeContext) -> Update:
        # The reference shown beside the verdict is the one graded against now (a fixed tasks
        # file changes it), not the run's.
        kind = "rubric" if isinstance(self.track, ResearchTrack) else "answer"
        if isinstance(self.track, PhybenchTrack):
            verdict = await self.track.grade_response(task, answer)
        else:
            verdict = await self.track.grade_response(task, answer, ctx.judge)
        return {**_verdict_update(verdict), "reference": reference_of(kind, task.answer)}


# FrontierMath outcomes that come from running and verifying an accepted submission.
_FRONTIERMATH_GRADED = frozenset(
    {Outcome.CORRECT, Outcome.INCORRECT, Outcome.ANSWER_ERROR, Outcome.ANSWER_TIMEOUT, Outcome.VERIFY_ERROR}
)


class FrontierMathRegrader(Regrader):
    needs_sandbox = True
    track: FrontierMathTrack

    def __init__(self, track: FrontierMathTrack) -> None:
        self.track = track

    def stored_answer(self, record: SampleRecord, path: Path, line: int) -> Any:
        if record.outcome not in _FRONTIERMATH_GRADED:
            return NotRescored(f"{record.outcome.value}: no submission was graded")
        if record.submission is None:
            return NotRescored("no stored submission")
        return record.submission

    async def regrade(self, task: Any, answer: Any, ctx: RegradeContext) -> Update:
        if ctx.sandbox is None:
            raise RuntimeError("re-verifying FrontierMath needs a sandbox")
        submission: SubmissionRecord = answer
        runner = SubmissionRunner(ctx.sandbox, ctx.sandbox_config, ctx.events)
        # answer() runs again in a fresh sandbox (the stored value is only a bounded repr);
        # the rules are the run's: checked but graded, unless it refused invalid submissions.
        result = await runner.evaluate(
            submission.code, task, turn=submission.turn, enforce_checks=self.track.reject_invalid
        )
        return {
            "outcome": result.outcome,
            "score": 1.0 if result.correct else 0.0,
            "success": result.correct,
            "error": result.error,
            "submission": result.record,
            "reference": frontiermath_reference(task),
            # No judge or EED grades FrontierMath: whatever a stored record says there is not kept.
            "judge": None,
            "eed": None,
        }


def regrader_for(track: Track) -> Regrader:
    if isinstance(track, FrontierMathTrack):
        return FrontierMathRegrader(track)
    if isinstance(track, OlympiadTrack | ResearchTrack | PhybenchTrack):
        return ScienceRegrader(track)
    raise UserError(f"track {track.name!r} cannot be re-scored")
