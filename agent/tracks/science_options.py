"""Validated ``track_options`` for the science tracks: a typo in a config is an error, not a no-op."""

from __future__ import annotations

from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from proctor.agent.errors import UserError
from proctor.agent.inputs.config import PAPER_SUCCESS_THRESHOLD


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Parse-error retries of the judge (so up to 1 + judge_retries judge calls per sample).
    judge_retries: int = Field(default=2, ge=0, le=10)
    # A bare file name is looked up in configs/prompts/.
    judge_prompt: str
    # None: the problem text alone is the prompt.
    answer_prompt: str | None


class OlympiadOptions(_Options):
    judge_prompt: str = "olympiad_judge.txt"
    answer_prompt: str | None = "science_answer.txt"
    python_tool: bool = False
    max_tool_turns: int = Field(default=20, ge=1)
    # Off by default: the paper's judge grades every answer. On, clear matches are settled
    # CORRECT without a judge call (a saving that may differ from the judge: docs/judge-tracks.md).
    precheck: bool = False
    # Part of the pre-check: plain-algebra answers compared with sympy (EED's equivalence step).
    symbolic_precheck: bool = True
    precheck_timeout_s: float = Field(default=5.0, gt=0)
    # "full": the judge sees the model's whole final response (the default: the judge decides
    # what the attempted answer is). "final": only the marked answer (the text after the last
    # "FINAL ANSWER:" marker, else the last \boxed{}), or the whole response when there is none.
    judge_answer: Literal["full", "final"] = "full"


class ResearchOptions(_Options):
    judge_prompt: str = "research_judge.txt"
    answer_prompt: str | None = None
    success_threshold: float = Field(default=PAPER_SUCCESS_THRESHOLD, ge=0, le=10)


class PhybenchOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    answer_prompt: str = "phybench_answer.txt"
    # "strict" reproduces the published scorer; "fixed" opts into its documented fixes.
    eed_mode: Literal["strict", "fixed"] = "strict"
    # Hard wall-clock budget per scored pair. None: long enough for the published step limits
    # (simplify 30 s, equals 10 s) to fire, as the published scorer lets them
    # (proctor.agent.scoring.eed.published_pair_budget_s); a number is a tighter, opt-in budget.
    eed_timeout_s: float | None = Field(default=None, gt=0)


OptionsT = TypeVar("OptionsT", bound=BaseModel)


def parse_options(model: type[OptionsT], options: dict[str, Any], track: str) -> OptionsT:
    try:
        return model.model_validate(options)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(part) for part in problem["loc"]) or "?"
        raise UserError(f"track_options for {track}: field '{where}': {problem['msg']}") from None
