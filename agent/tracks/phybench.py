"""PHYBench: the model answers with a final ``\\boxed{...}`` expression, scored by EED.

``score`` is the EED score (0..100); ``success`` means 100, i.e. the expressions are
equivalent. Outcomes: ``correct`` (100), ``incorrect`` (below 100, including answers the scorer's
zero-score gates reject), ``no_submission`` (no boxed expression in the final response), and
``scorer_timeout`` (EED ran past its hard limit: a fact about the scorer, not the model).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from proctor.agent.inputs.config import RunConfig
from proctor.agent.judge.prompts import ANSWER_PLACEHOLDERS, load_template
from proctor.agent.results.records import EEDRecord, Outcome, ReferenceRecord, SampleRecord
from proctor.agent.scoring.eed import (
    PUBLISHED_EQUALS_LIMIT_S,
    PUBLISHED_SIMPLIFY_LIMIT_S,
    eed_score_async,
    extract_boxed,
    published_pair_budget_s,
)
from proctor.agent.text.answer_shape import boxed_contents, distinct
from proctor.agent.tracks.base import SampleContext, Track
from proctor.agent.tracks.science_common import (
    ModelFailed,
    SampleLog,
    Verdict,
    ask_model_once,
    reference_of,
    render_answer_prompt,
)
from proctor.agent.tracks.science_options import PhybenchOptions, parse_options
from proctor.agent.tracks.science_tasks import ScienceTask, load_science_tasks

TIMEOUT_STATUS = "timeout"
# Statuses of a pair the scorer handled normally; any other status is recorded as the error.
SCORED_STATUSES = frozenset({"ok", "equivalent"})


class PhybenchTrack(Track):
    name: ClassVar[str] = "phybench"
    needs_sandbox: ClassVar[bool] = False

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        self.settings = parse_options(PhybenchOptions, self.options, self.name)
        self.answer_template = load_template(self.settings.answer_prompt, ANSWER_PLACEHOLDERS)

    def reference_for(self, task: ScienceTask) -> ReferenceRecord:
        return reference_of("answer", task.answer)

    def load_tasks(self, path: Path) -> list[ScienceTask]:
        return load_science_tasks(path, "phybench")

    @property
    def pair_budget_s(self) -> float:
        """The option when given (a tighter budget), else room for the published step limits."""
        return self.settings.eed_timeout_s or published_pair_budget_s()

    def effective_settings(self, config: RunConfig) -> dict[str, Any]:
        return {
            "eed_mode": self.settings.eed_mode,
            "eed_simplify_limit_s": PUBLISHED_SIMPLIFY_LIMIT_S,
            "eed_equals_limit_s": PUBLISHED_EQUALS_LIMIT_S,
            "eed_pair_budget_s": self.pair_budget_s,
            "eed_pair_budget_source": "option" if self.settings.eed_timeout_s else "published step limits",
        }

    def _boxed_answer(self, response: str) -> str | None:
        """The last ``\\boxed{}`` (published); in fixed mode every different boxed answer.

        Fixed mode scores several different boxed answers as a hedge: each is a reading and the
        worst one counts (agent/scoring/hedges.py).
        """
        if self.settings.eed_mode == "fixed":
            # Every box (each takes at least 8 characters): with the scan's default bound of 64,
            # 64 boxed guesses and then the right one were scored as the last box alone.
            boxes = distinct(boxed_contents(response, limit=len(response) // 8 + 1))
            if len(boxes) > 1:
                return " ".join("\\boxed{" + box + "}" for box in boxes)
        return extract_boxed(response)

    async def run_sample(self, task: ScienceTask, trial: int, ctx: SampleContext) -> SampleRecord:
        log = SampleLog(self.name, task.id, trial, task.subject, ctx, self.reference_for(task))
        try:
            prompt = render_answer_prompt(task.question, self.answer_template, ctx)
            response = await ask_model_once(log, prompt)
        except ModelFailed as exc:
            return log.finish_failed(exc)
        return log.finish_with(await self.grade_response(task, response))

    async def grade_response(self, task: ScienceTask, response: str) -> Verdict:
        """Score the final response's boxed answer by EED (also used by ``proctor rescore``)."""
        boxed = self._boxed_answer(response)
        if boxed is None or not boxed.strip():
            return Verdict(
                Outcome.NO_SUBMISSION,
                error="no \\boxed{...} answer in the final response",
                eed=EEDRecord(score=0.0, status="no_boxed_answer", extracted_answer=boxed),
            )
        result = await eed_score_async(
            task.answer, boxed, mode=self.settings.eed_mode, timeout_s=self.pair_budget_s
        )
        eed = EEDRecord(
            score=result.score,
            relative_distance=result.relative_distance,
            distance=result.distance,
            reference_size=result.reference_size,
            answer_size=result.answer_size,
            status=result.status,
            extracted_answer=boxed,
        )
        error = None if result.status in SCORED_STATUSES else f"EED {result.status}: {result.detail or '-'}"
        if result.status == TIMEOUT_STATUS:
            return Verdict(Outcome.SCORER_TIMEOUT, error=error, eed=eed)
        equivalent = result.score >= 100.0
        return Verdict(
            Outcome.CORRECT if equivalent else Outcome.INCORRECT,
            score=result.score,
            success=equivalent,
            error=error,
            eed=eed,
        )
