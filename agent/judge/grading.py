"""Grading one answer: pre-check, then the judge, ending in an outcome and a ``JudgeRecord``.

``judge_error`` is left out of accuracy and re-run on resume, so no answer may be able to end
its own sample that way. When the judge gives no verdict on an answer, the same prompt is sent
once more with a placeholder answer, to tell a judge that is broken from an answer that breaks
it (docs/judge-tracks.md, "Retries and errors"):

* the endpoint refuses every request until a person acts (credentials, quota): ``judge_error``,
  no placeholder request (it could show nothing);
* no verdict on the placeholder either: the judge or its endpoint fails without this answer
  too, ``judge_error``;
* a verdict on the placeholder, after the judge answered this answer without a verdict (every
  reply unparseable) or refused its content (HTTP 4xx, a provider's refusal): the answer kept
  the judge from grading it, ``incorrect``;
* a verdict on the placeholder, after the endpoint failed on this answer (HTTP 5xx, a dropped
  connection, a timeout, after the client's own retries): the endpoint works, so the answer is
  asked once more. A verdict then grades it (the failure passed); another failure means the
  endpoint fails only while this answer is in the prompt, ``incorrect``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from decimal import Decimal
from functools import partial
from typing import Any, TypeVar

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
    verdict, record = await _judge(judge, template, fields, _binary_parser, parse_retries)
    record.precheck = note
    if isinstance(verdict, Grade):
        return verdict
    record.verdict = verdict.text
    correct = verdict.correct
    return Grade(Outcome.CORRECT if correct else Outcome.INCORRECT, float(correct), correct, record)


def _binary_parser(answer: str) -> Callable[[str | None], BinaryVerdict]:
    return partial(parse_binary_verdict, answer=answer)


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

    def parser(shown: str) -> Callable[[str | None], PointsVerdict]:
        return partial(parse_points_verdict, max_points=max_points, answer=shown)

    verdict, record = await _judge(judge, template, fields, parser, parse_retries)
    if isinstance(verdict, Grade):
        return verdict
    record.verdict, record.points = verdict.text, verdict.as_float
    # Exactly: the threshold as written in the config (its shortest repr) against the points as
    # written by the judge, so 6.9999999999999999 stays below 7.
    success = verdict.points >= Decimal(repr(float(success_threshold)))
    return Grade(Outcome.CORRECT if success else Outcome.INCORRECT, verdict.as_float, success, record)


VerdictT = TypeVar("VerdictT", BinaryVerdict, PointsVerdict)


async def _judge(
    judge: ModelClient,
    template: str,
    fields: dict[str, str],
    parser: Callable[[str], Callable[[str | None], VerdictT]],
    parse_retries: int,
) -> tuple[VerdictT | Grade, JudgeRecord]:
    """The judge's verdict on the filled prompt, or the grade that says why there is none.

    ``parser`` makes the verdict parser for the answer the prompt shows (the parser is stricter
    when that answer carries a verdict itself: agent/judge/verdict.py).
    """
    prompt = fill_template(template, fields)
    parse = parser(fields["answer"])
    result = await ask_judge(judge, prompt, parse, parse_retries=parse_retries)
    record = _judge_record(result, judge.model, prompt)
    if result.verdict is not None:
        return result.verdict, record
    if result.endpoint_refused:  # credentials or quota: no other request can succeed either
        return Grade(Outcome.JUDGE_ERROR, 0.0, False, record, result.error), record
    probe_answer = PLACEHOLDER_ANSWER
    probe_prompt = fill_template(template, {**fields, "answer": probe_answer})
    probe = await ask_judge(judge, probe_prompt, parser(probe_answer), parse_retries=parse_retries)
    _add_tokens(record, probe)
    record.answer_probe = {
        "answer": probe_answer,
        "answer_error": result.error,
        "replies": [capped(reply) for reply in probe.replies],
        "verdict": None if probe.verdict is None else probe.verdict.text,
        **({"error": probe.error} if probe.error else {}),
    }
    if probe.verdict is None:  # the judge fails without this answer too: the judge's fault
        return Grade(Outcome.JUDGE_ERROR, 0.0, False, record, result.error), record
    if result.model_error is not None and not result.request_rejected:
        # The endpoint failed on this answer and works on the placeholder: a passing outage, or
        # a failure only this answer causes. Asking once more tells them apart.
        again = await ask_judge(judge, prompt, parse, parse_retries=parse_retries)
        _add_tokens(record, again)
        record.replies += [capped(reply) for reply in again.replies]
        record.parse_error = "; ".join(result.parse_errors + again.parse_errors) or None
        record.answer_probe["asked_again"] = {
            "replies": len(again.replies),
            "verdict": None if again.verdict is None else again.verdict.text,
            **({"error": again.error} if again.error else {}),
        }
        if again.verdict is not None:
            return again.verdict, record
        error = (
            f"the judge endpoint failed on this answer ({result.error}), graded a placeholder answer, "
            f"then failed on this answer again ({again.error}): it fails only while this answer is "
            "in the prompt, so the sample is scored incorrect"
        )
        return Grade(Outcome.INCORRECT, 0.0, False, record, error), record
    error = (
        f"the judge gave no verdict on this answer ({result.error}) but did on a placeholder answer, "
        "so the answer kept it from grading: scored incorrect"
    )
    return Grade(Outcome.INCORRECT, 0.0, False, record, error), record


def _add_tokens(record: JudgeRecord, result: JudgeResult[Any]) -> None:
    """A probe's or second request's tokens are the judge's too."""
    record.input_tokens += sum(u.input_tokens for u in result.usage)
    record.output_tokens += sum(u.output_tokens for u in result.usage)
