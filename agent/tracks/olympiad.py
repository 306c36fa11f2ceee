"""FrontierScience-Olympiad: the model answers (no tools by default), a judge grades.

Protocol (docs/judge-tracks.md): the problem goes to the model with the answering prompt; the
model's final response is graded against the reference answer, first by the deterministic
pre-check (which can only settle CORRECT), then by the judge with the paper's verbatim prompt.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from proctor.agent.inputs.config import RunConfig
from proctor.agent.judge.grading import grade_olympiad
from proctor.agent.judge.prompts import ANSWER_PLACEHOLDERS, OLYMPIAD_PLACEHOLDERS, load_template
from proctor.agent.model.base import ModelClient
from proctor.agent.results.records import Outcome, ReferenceRecord, SampleRecord
from proctor.agent.tracks.base import SampleContext, Track
from proctor.agent.tracks.science_common import (
    ModelFailed,
    SampleLog,
    Verdict,
    ask_model_once,
    final_answer_of,
    paper_protocol_settings,
    reference_of,
    render_answer_prompt,
)
from proctor.agent.tracks.science_options import OlympiadOptions, parse_options
from proctor.agent.tracks.science_tasks import ScienceTask, load_science_tasks


class OlympiadTrack(Track):
    name: ClassVar[str] = "olympiad"
    needs_sandbox: ClassVar[bool] = False
    needs_judge: ClassVar[bool] = True

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        self.settings = parse_options(OlympiadOptions, self.options, self.name)
        # The sandbox is needed only when the python tool is switched on for this run.
        self.needs_sandbox = self.settings.python_tool  # type: ignore[misc]
        self.judge_template = load_template(self.settings.judge_prompt, OLYMPIAD_PLACEHOLDERS)
        self.answer_template = (
            load_template(self.settings.answer_prompt, ANSWER_PLACEHOLDERS)
            if self.settings.answer_prompt
            else None
        )

    def effective_settings(self, config: RunConfig) -> dict[str, Any]:
        return {
            **paper_protocol_settings(config),
            "python_tool": self.settings.python_tool,
            "precheck": self.settings.precheck,
        }

    def reference_for(self, task: ScienceTask) -> ReferenceRecord:
        return reference_of("answer", task.answer)

    def load_tasks(self, path: Path) -> list[ScienceTask]:
        return load_science_tasks(path, "olympiad")

    def answer_prompt(self, task: ScienceTask, ctx: SampleContext) -> str:
        return render_answer_prompt(task.question, self.answer_template, ctx)

    async def _answer(self, log: SampleLog, task: ScienceTask) -> str:
        if self.settings.python_tool:
            from proctor.agent.tracks.science_tools import answer_with_python_tool

            return await answer_with_python_tool(
                log, self.answer_prompt(task, log.ctx), self.settings.max_tool_turns
            )
        return await ask_model_once(log, self.answer_prompt(task, log.ctx))

    async def run_sample(self, task: ScienceTask, trial: int, ctx: SampleContext) -> SampleRecord:
        log = SampleLog(self.name, task.id, trial, task.subject, ctx, self.reference_for(task))
        try:
            response = await self._answer(log, task)
        except ModelFailed as exc:
            return log.finish_failed(exc)
        return log.finish_with(await self.grade_response(task, response, ctx.judge))

    async def grade_response(self, task: ScienceTask, response: str, judge: ModelClient | None) -> Verdict:
        """Grade the model's final response (also used by ``proctor rescore``)."""
        if not response.strip():
            return Verdict(Outcome.NO_SUBMISSION, error="the model's final response is empty")
        final_answer = final_answer_of(response)
        for_judge = final_answer if self.settings.judge_answer == "final" and final_answer else response
        grade = await grade_olympiad(
            judge=judge,
            template=self.judge_template,
            problem=task.question,
            reference=task.answer,
            answer=for_judge,
            final_answer=final_answer,
            use_precheck=self.settings.precheck,
            symbolic=self.settings.symbolic_precheck,
            symbolic_timeout_s=self.settings.precheck_timeout_s,
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
