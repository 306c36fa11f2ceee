"""FrontierMathTrack: the runner's entry point for loading tasks and running one sample."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from typing import Any, ClassVar

from proctor.agent.errors import UserError
from proctor.agent.inputs.config import RunConfig
from proctor.agent.results.records import Outcome, ReferenceRecord, SampleRecord
from proctor.agent.text.capped_text import capped
from proctor.agent.tracks.base import SampleContext, Track
from proctor.agent.tracks.frontiermath.loop import DEFAULT_MAX_TURNS, Conversation
from proctor.agent.tracks.frontiermath.profiles import get_profile
from proctor.agent.tracks.frontiermath.prompt import load_template, render_prompt
from proctor.agent.tracks.frontiermath.tasks import FrontierMathTask, load_frontiermath_tasks
from proctor.agent.tracks.frontiermath.texts import load_texts, texts_record, with_texts


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


class FrontierMathTrack(Track):
    """Options (``track_options``): ``reject_invalid_submissions`` (default false): a submission
    that breaks the rules (syntax, signature, comments) is graded as submitted and its problems
    are recorded (``submission.check_problems``); when true it is refused and the model may
    resubmit. ``max_turns``: a safety bound on turns (default 1000); the token budget normally
    ends a conversation first. The conversation rules are the run's ``protocol`` profile."""

    name: ClassVar[str] = "frontiermath"
    needs_sandbox: ClassVar[bool] = True

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        reject_invalid = self.options.get("reject_invalid_submissions", False)
        if not isinstance(reject_invalid, bool):
            # bool("false") is True: a quoted YAML value must not silently turn refusal on.
            raise UserError(
                f"field 'track_options.reject_invalid_submissions': expected true or false, "
                f"got {reject_invalid!r}"
            )
        self.reject_invalid = reject_invalid
        self.max_turns = int(self.options.get("max_turns", DEFAULT_MAX_TURNS))
        # The user's own texts for the protocol's messages (texts.py), checked now: a bad
        # template is one line before any sample, not an error on some later turn.
        self.texts = load_texts(self.options.get("protocol_texts"))
        self._templates: dict[Path | None, str] = {}

    def effective_settings(self, config: RunConfig) -> dict[str, Any]:
        """The user's protocol texts, by file and sha256 (the profile's own are in ``protocol``)."""
        return {"protocol_texts": texts_record(self.texts)}

    def reference_for(self, task: FrontierMathTask) -> ReferenceRecord:
        return reference_of(task)

    def load_tasks(self, path: Path) -> list[FrontierMathTask]:
        return load_frontiermath_tasks(path)

    def _template(self, path: Path | None) -> str:
        if path not in self._templates:
            self._templates[path] = load_template(path)
        return self._templates[path]

    async def run_sample(self, task: FrontierMathTask, trial: int, ctx: SampleContext) -> SampleRecord:
        started_at, started = _now(), time.monotonic()
        prompt = render_prompt(
            self._template(ctx.config.prompt_template), task, ctx.config, _libraries_of(ctx)
        )
        conversation = Conversation(
            task,
            ctx,
            prompt,
            reject_invalid=self.reject_invalid,
            profile=with_texts(get_profile(ctx.config.protocol), self.texts),
            max_turns=self.max_turns,
        )
        result = await conversation.run()
        budget = result.budget
        correct = result.outcome is Outcome.CORRECT
        return SampleRecord(
            run_id=ctx.run_id,
            track=self.name,
            task_id=task.id,
            trial=trial,
            model=ctx.model_name,
            subject=task.subject,
            reasoning_effort=ctx.reasoning_effort,
            outcome=result.outcome,
            score=1.0 if correct else 0.0,
            success=correct,
            error=result.error,
            input_tokens=budget.input_tokens,
            output_tokens=budget.output_tokens,
            reasoning_tokens=budget.reasoning_tokens,
            total_tokens=budget.used,
            tokens_estimated=budget.estimated,
            turns=budget.turns,
            forced_submission_turn=budget.forced_submission_turn,
            cap_reached=budget.cap_reached,
            transcript=result.transcript,
            tool_calls=result.tool_calls,
            submission=result.submission,
            reference=self.reference_for(task),
            sandbox_image=_image_of(ctx),
            retries=result.retries,
            provider_refusal=result.provider_refusal,
            reasoning_not_carried=result.reasoning_not_carried,
            started_at=started_at,
            finished_at=_now(),
            duration_s=time.monotonic() - started,
        )


def reference_of(task: FrontierMathTask) -> ReferenceRecord:
    """What a submission is checked against: the verify() source, or the expected value's."""
    if task.verification_code is not None:
        return ReferenceRecord(kind="verify", text=capped(task.verification_code))
    return ReferenceRecord(kind="expected", text=capped(task.answer or ""), tolerance=task.tolerance)


def _libraries_of(ctx: SampleContext) -> dict[str, str] | None:
    """What the sandbox says it offers; recorded in run.json with the rest of describe()."""
    if ctx.sandbox is None:
        return {}
    libraries = ctx.sandbox.describe().get("libraries")
    if not isinstance(libraries, dict):
        return None
    return {str(name): str(version) for name, version in libraries.items()}


def _image_of(ctx: SampleContext) -> str | None:
    if ctx.sandbox is None:
        return None
    described = ctx.sandbox.describe()
    image = described.get("image_id") or described.get("image")
    if image:
        return str(image)
    # The local backend has no image: name what ran the code instead.
    version = described.get("python_version")
    backend = str(described.get("backend", ctx.sandbox.backend))
    return f"{backend} (host python {version})" if version else backend
