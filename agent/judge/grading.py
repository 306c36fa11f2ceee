"""Grading one answer: pre-check, then the judge, ending in an outcome and a ``JudgeRecord``.

A judge endpoint that fails for good (an outage, a refused key) ends in ``Outcome.JUDGE_ERROR``:
the sample says nothing about the model. When the judge answered but gave no verdict (every
reply unparseable) or refused the request's content (HTTP 4xx: say, an answer longer than its
context), the answer may be the cause: a hostile answer can tell the judge not to write a
verdict, and ``judge_error`` is left out of accuracy. So the same prompt is sent once more with
a placeholder answer. A verdict on the placeholder shows the judge and prompt work, and the
answer kept the judge from grading it: ``incorrect``. No verdict there either: ``judge_error``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from proctor.agent.judge.caller import JudgeResult, ask_judge
from proctor.agent.judge.forgery import SectionMatch, prompt_section_matches
from proctor.agent.judge.precheck import PrecheckResult, precheck
from proctor.agent.judge.prompts import fill_template
from proctor.agent.judge.symbolic import symbolic_pair
from proctor.agent.judge.verdict import (
    BinaryVerdict,
    PointsVerdict,
    parse_binary_verdict,
    parse_points_verdict,
)
from proctor.agent.model.base import ModelClient
from proctor.agent.results.records import JudgeRecord, Outcome
from proctor.agent.text.capped_text import capped, text_sha256


@dataclass(frozen=True)
class Grade:
    outcome: Outcome
    score: float
    success: bool
    judge: JudgeRecord
    error: str | None = None
    # Lines of the answer that imitate the judge prompt's sections (agent/judge/forgery.py).
    prompt_sections: tuple[SectionMatch, ...] = ()


NO_JUDGE = "no judge model configured (set `judge:` in the run config)"
# Stands in for the answer when the judge gave no verdict on it (see the module's docstring).
PLACEHOLDER_ANSWER = "(No answer was given.)"


def _judge_record(
    result: JudgeResult[BinaryVerdict] | JudgeResult[PointsVerdict], model: str, prompt: str
) -> JudgeRecord:
    return JudgeRecord(
        decided_by="judge",
        model=model,
        prompt=capped(prompt),
        prompt_chars=len(prompt),
        prompt_sha256=text_sha256(prompt),
        # Every reply, parsed or not, bounded like the prompt (a reply can be megabytes long).
        replies=[capped(reply) for reply in result.replies],
        parse_error="; ".join(result.parse_errors) or None,
        input_tokens=sum(u.input_tokens for u in result.usage),
        output_tokens=sum(u.output_tokens for u in result.usage),
    )


async def grade_olympiad(
    *,
    judge: ModelClient | None,
    template: str,
    problem: str,
    reference: str,
    answer: str,
    final_answer: str | None,
    use_precheck: bool = True,
    symbolic: bool = True,
    symbolic_timeout_s: float = 5.0,
    parse_retries: int = 2,
) -> Grade:
    """``answer`` goes to the judge; ``final_answer`` (the marked one, if any) to the pre-check."""
    grade = await _grade_olympiad(
        judge=judge,
        template=template,
        problem=problem,
        reference=reference,
        answer=answer,
        final_answer=final_answer,
        use_precheck=use_precheck,
        symbolic=symbolic,
        symbolic_timeout_s=symbolic_timeout_s,
        parse_retries=parse_retries,
    )
    return _with_sections(grade, template, answer)


def _with_sections(grade: Grade, template: str, answer: str) -> Grade:
    """Flag an answer that imitates the prompt's sections, however it was graded."""
    return replace(grade, prompt_sections=tuple(prompt_section_matches(template, answer)))


async def _grade_olympiad(
    *,
    judge: ModelClient | None,
    template: str,
    problem: str,
    reference: str,
    answer: str,
    final_answer: str | None,
    use_precheck: bool,
    symbolic: bool,
    symbolic_timeout_s: float,
    parse_retries: int,
) -> Grade:
    checked: PrecheckResult | None = None
    if use_precheck:
        checked = _guarded_precheck(reference, final_answer)
        if not checked.settled_correct and symbolic:
            checked = await _symbolic_precheck(reference, final_answer, symbolic_timeout_s) or checked
    if checked is not None and checked.settled_correct:
        record = JudgeRecord(decided_by="precheck", verdict="CORRECT", precheck=checked.describe())
        return Grade(Outcome.CORRECT, 1.0, True, record)
    note = checked.describe() if checked is not None else None
    if judge is None:
        record = JudgeRecord(decided_by="judge", precheck=note)
        return Grade(Outcome.JUDGE_ERROR, 0.0, False, record, NO_JUDGE)
    fields = {"problem": problem, "reference answer": reference, "answer": answer}
    prompt = fill_template(template, fields)
    result = await ask_judge(judge, prompt, parse_binary_verdict, parse_retries=parse_retries)
    record = _judge_record(result, judge.model, prompt)
    record.precheck = note
    if result.verdict is None:
        return await _without_a_verdict(
            judge, template, fields, parse_binary_verdict, parse_retries, result, record
        )
    record.verdict = result.verdict.text
    correct = result.verdict.correct
    return Grade(Outcome.CORRECT if correct else Outcome.INCORRECT, float(correct), correct, record)


def _guarded_precheck(reference: str, answer: str | None) -> PrecheckResult:
    """The pre-check is an optimisation: if it ever breaks on some text, the judge decides."""
    try:
        return precheck(reference, answer)
    except Exception as exc:
        return PrecheckResult(False, f"pre-check failed: {type(exc).__name__}: {exc}")


async def _symbolic_precheck(reference: str, answer: str | None, timeout_s: float) -> PrecheckResult | None:
    pair = symbolic_pair(reference, answer)
    if pair is None:
        return None
    from proctor.agent.scoring.eed import eed_score_async

    try:
        result = await eed_score_async(*pair, mode="fixed", timeout_s=timeout_s)
    except Exception as exc:  # the pre-check is an optimisation: if it breaks, the judge decides
        return PrecheckResult(False, f"no exact or numeric match; symbolic check failed: {exc}")
    if result.status == "equivalent":
        return PrecheckResult(True, "symbolic")
    return PrecheckResult(False, f"no exact or numeric match; symbolic check: {result.status}")


async def grade_research(
    *,
    judge: ModelClient | None,
    template: str,
    problem: str,
    rubric: str,
    answer: str,
    success_threshold: float = 7.0,
    max_points: float = 10.0,
    parse_retries: int = 2,
) -> Grade:
    grade = await _grade_research(
        judge=judge,
        template=template,
        problem=problem,
        rubric=rubric,
        answer=answer,
        success_threshold=success_threshold,
        max_points=max_points,
        parse_retries=parse_retries,
    )
    return _with_sections(grade, template, answer)


async def _grade_research(
    *,
    judge: ModelClient | None,
    template: str,
    problem: str,
    rubric: str,
    answer: str,
    success_threshold: float,
    max_points: float,
    parse_retries: int,
) -> Grade:
    if judge is None:
        return Grade(Outcome.JUDGE_ERROR, 0.0, False, JudgeRecord(decided_by="judge"), NO_JUDGE)
    fields = {"problem": problem, "rubric": rubric, "answer": answer}
    prompt = fill_template(template, fields)

    def parse(reply: str | None) -> PointsVerdict:
        return parse_points_verdict(reply, max_points=max_points)

    result = await ask_judge(judge, prompt, parse, parse_retries=parse_retries)
    record = _judge_record(result, judge.model, prompt)
    if result.verdict is None:
        return await _without_a_verdict(judge, template, fields, parse, parse_retries, result, record)
    points = result.verdict.points
    record.verdict, record.points = result.verdict.text, points
    success = points >= success_threshold
    return Grade(Outcome.CORRECT if success else Outcome.INCORRECT, points, success, record)


async def _without_a_verdict(
    judge: ModelClient,
    template: str,
    fields: dict[str, str],
    parse: Callable[[str | None], BinaryVerdict] | Callable[[str | None], PointsVerdict],
    parse_retries: int,
    result: JudgeResult[BinaryVerdict] | JudgeResult[PointsVerdict],
    record: JudgeRecord,
) -> Grade:
    """No verdict on the answer: blame the answer if the judge grades a placeholder, else the judge."""
    if result.model_error is not None and not result.request_rejected:
        return Grade(Outcome.JUDGE_ERROR, 0.0, False, record, result.error)  # an outage, not the answer
    probe_prompt = fill_template(template, {**fields, "answer": PLACEHOLDER_ANSWER})
    probe: JudgeResult[Any] = await ask_judge(judge, probe_prompt, parse, parse_retries=parse_retries)
    record.input_tokens += sum(u.input_tokens for u in probe.usage)
    record.output_tokens += sum(u.output_tokens for u in probe.usage)
    verdict = probe.verdict
    record.answer_probe = {
        "answer": PLACEHOLDER_ANSWER,
        "replies": [capped(reply) for reply in probe.replies],
        "verdict": None if verdict is None else verdict.text,
        **({"error": probe.error} if probe.error else {}),
    }
    if verdict is None:
        return Grade(Outcome.JUDGE_ERROR, 0.0, False, record, result.error)
    return Grade(
        Outcome.INCORRECT,
        0.0,
        False,
        record,
        f"the judge gave no verdict on this answer ({result.error}) but did on a placeholder answer, "
        "so the answer kept it from grading: scored incorrect",
    )
