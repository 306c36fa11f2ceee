"""FrontierScience-Research: the model answers, a judge grades against a 10-point rubric.

``score`` is the points awarded (0..10); a trial succeeds at ``success_threshold`` points
(7 by default, the paper's threshold). There is no pre-check: only the judge can apply a rubric.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from proctor.agent.inputs.config import RunConfig
from proctor.agent.judge.grading import grade_research
from proctor.agent.judge.prompts import ANSWER_PLACEHOLDERS, RESEARCH_PLACEHOLDERS, load_template
from proctor.agent.model.base import ModelClient
from proctor.agent.results.records import Outcome, ReferenceRecord, SampleRecord
from proctor.agent.tracks.base import SampleContext, Track
from proctor.agent.tracks.science_common import (
    ModelFailed,
    SampleLog,
    Verdict,
    ask_model_once,
    paper_protocol_settings,
    reference_of,
    render_answer_prompt,
)
from proctor.agent.tracks.science_options import ResearchOptions, parse_options
from proctor.agent.tracks.science_tasks import ScienceTask, load_science_tasks


class ResearchTrack(Track):
    name: ClassVar[str] = "research"
    needs_sandbox: ClassVar[bool] = False
    needs_judge: ClassVar[bool] = True

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        self.settings = parse_options(ResearchOptions, self.options, self.name)
        self.judge_template = load_template(self.settings.judge_prompt, RESEARCH_PLACEHOLDERS)
        self.answer_template = (
            load_template(self.settings.answer_prompt, ANSWER_PLACEHOLDERS)
            if self.settings.answer_prompt
            else None
        )

    def effective_settings(self, config: RunConfig) -> dict[str, Any]:
        return {**paper_protocol_settings(config), "success_threshold": self.settings.success_threshold}

    def reference_for(self, task: ScienceTask) -> ReferenceRecord:
        return reference_of("rubric", task.answer)

    def load_tasks(self, path: Path) -> list[ScienceTask]:
        return load_science_tasks(path, "research")

    def answer_prompt(self, task: ScienceTask, ctx: SampleContext) -> str:
        return render_answer_prompt(task.question, self.answer_template, ctx)

    async def run_sample(self, task: ScienceTask, trial: int, ctx: SampleContext) -> SampleRecord:
        log = SampleLog(self.name, task.id, trial, task.subject, ctx, self.reference_for(task))
        try:
            response = await ask_model_once(log, self.answer_prompt(task, ctx))
        except ModelFailed as exc:
            return log.finish_failed(exc)
        return log.finish_with(await self.grade_response(task, response, ctx.judge))

    async def grade_response(self, task: ScienceTask, response: str, judge: ModelClient | None) -> Verdict:
        """Grade the model's response against the rubric (also used by ``proctor rescore``)."""
        if not response.strip():
            return Verdict(Outcome.NO_SUBMISSION, error="the model's final response is empty")
        grade = await grade_research(
            judge=judge,
            template=self.judge_template,
            problem=task.question,
            rubric=task.rubric,
            answer=response,
            success_threshold=self.settings.success_threshold,
            parse_retries=self.settings.judge_retries,
        )
        return Verdict(
            grade.outcome,
            grade.score,
            grade.success,
            grade.error,
            grade.judge,
            prompt_sections=grade.prompt_sections,
        )
