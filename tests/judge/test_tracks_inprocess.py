"""Olympiad and Research tracks end to end with in-process model and judge clients."""

from __future__ import annotations

from pathlib import Path

import pytest

from proctor.agent.errors import UserError
from proctor.agent.model.base import ChatResponse, EndpointRefused, ModelError, Usage
from proctor.agent.results.records import Outcome
from proctor.agent.tracks.olympiad import OlympiadTrack
from proctor.agent.tracks.registry import make_track
from proctor.agent.tracks.research import ResearchTrack
from proctor.agent.tracks.science_tasks import ScienceTask
from tests.judge.support import ListClient, make_ctx

PENDULUM = ScienceTask(id="t1", question="What is the period ratio?", answer="6.7", subject="physics")
# The pre-check is opt-in (the paper's judge grades every answer); tests of it switch it on.
PRECHECK = {"precheck": True}
RUBRIC_TASK = ScienceTask(
    id="r1", question="Design the experiment.", answer="Points: 10, Item: all", subject="biology"
)


async def test_by_default_the_judge_grades_every_answer_as_in_the_paper() -> None:
    """Section 3: the judge is given the attempted answer and the reference and decides. Even an
    answer equal to the reference goes to it, and its verdict is the grade: the pre-check, which
    would settle this one CORRECT without asking, is Proctor's opt-in saving, not the default."""
    response = "The ratio is 6.7.\nFINAL ANSWER: 6.7"
    model = ListClient([response])
    judge = ListClient(["The derivation contradicts itself.\nVERDICT: INCORRECT"], model="judge-model")
    record = await OlympiadTrack().run_sample(PENDULUM, 0, make_ctx(model, judge))
    assert len(judge.requests) == 1
    assert f"The attempted answer: {response}\n***" in judge.requests[0][0]["content"]
    assert record.outcome is Outcome.INCORRECT and not record.success
    assert record.judge is not None and record.judge.decided_by == "judge" and record.judge.precheck is None
    assert OlympiadTrack().effective_settings(make_ctx(model, judge).config)["precheck"] is False


async def test_precheck_settles_close_number_without_calling_the_judge() -> None:
    model = ListClient(
        [
            ChatResponse(
                content="Working...\nFINAL ANSWER: 6.69",
                tool_calls=[],
                usage=Usage(input_tokens=120, output_tokens=30, reasoning_tokens=10),
                reasoning="think",
            )
        ]
    )
    judge = ListClient([], model="judge-model")
    record = await OlympiadTrack(PRECHECK).run_sample(PENDULUM, 3, make_ctx(model, judge))
    assert record.outcome is Outcome.CORRECT and record.success and record.score == 1.0
    assert judge.requests == []
    assert record.judge is not None and record.judge.decided_by == "precheck"
    assert record.judge.precheck == "settled correct by numeric"
    assert (record.task_id, record.trial, record.subject, record.track) == ("t1", 3, "physics", "olympiad")
    assert (record.input_tokens, record.output_tokens, record.reasoning_tokens, record.total_tokens) == (
        120,
        30,
        10,
        150,
    )
    assert [t.cumulative_tokens for t in record.turns] == [150]
    assert record.transcript[0] == {"role": "user", "content": model.requests[0][0]["content"]}
    assert record.transcript[1]["reasoning"] == "think"
    assert "What is the period ratio?" in record.transcript[0]["content"]


async def test_unsettled_answer_goes_to_the_judge_with_the_full_response() -> None:
    response = "The ratio is 6.9 by symmetry.\nFINAL ANSWER: 6.9"
    model = ListClient([response])
    judge = ListClient(["6.9 is not 6.7.\nVERDICT: INCORRECT"], model="judge-model")
    record = await OlympiadTrack(PRECHECK).run_sample(PENDULUM, 0, make_ctx(model, judge))
    assert record.outcome is Outcome.INCORRECT and not record.success and record.score == 0.0
    assert record.judge is not None
    assert record.judge.decided_by == "judge" and record.judge.model == "judge-model"
    assert record.judge.verdict == "INCORRECT"
    assert record.judge.replies == ["6.9 is not 6.7.\nVERDICT: INCORRECT"]
    assert record.judge.precheck == "deferred to judge: no exact or numeric match"
    (prompt,) = judge.requests[0]
    assert f"The attempted answer: {response}\n***" in prompt["content"]
    assert "The reference answer: 6.7\n***" in prompt["content"]


async def test_judge_answer_final_sends_only_the_marked_answer() -> None:
    model = ListClient(["long derivation\nFINAL ANSWER: 6.9"])
    judge = ListClient(["VERDICT: CORRECT"])
    track = OlympiadTrack({"judge_answer": "final", "precheck": False})
    record = await track.run_sample(PENDULUM, 0, make_ctx(model, judge))
    assert record.outcome is Outcome.CORRECT
    assert "The attempted answer: 6.9\n***" in judge.requests[0][0]["content"]
    assert record.judge is not None and record.judge.precheck is None


async def test_precheck_can_be_switched_off() -> None:
    model = ListClient(["FINAL ANSWER: 6.7"])
    judge = ListClient(["VERDICT: CORRECT"])
    record = await OlympiadTrack({"precheck": False}).run_sample(PENDULUM, 0, make_ctx(model, judge))
    assert record.judge is not None and record.judge.decided_by == "judge"
    assert len(judge.requests) == 1


async def test_unparseable_judge_is_retried_then_judge_error_not_incorrect() -> None:
    model = ListClient(["FINAL ANSWER: 7.9"])
    judge = ListClient(["VERDICT: incorrect", "> VERDICT: INCORRECT", ""] * 2)
    record = await OlympiadTrack().run_sample(PENDULUM, 0, make_ctx(model, judge))
    assert record.outcome is Outcome.JUDGE_ERROR and not record.success
    assert len(judge.requests) == 6  # three for the answer, three for the placeholder answer
    assert record.judge is not None and record.judge.replies == [
        "VERDICT: incorrect",
        "> VERDICT: INCORRECT",
        "",
    ]
    assert record.judge.verdict is None
    assert record.error is not None and "after 3 attempt(s)" in record.error


async def test_retry_that_succeeds_keeps_every_reply() -> None:
    model = ListClient(["FINAL ANSWER: 7.9"])
    judge = ListClient(["I think it's wrong", "VERDICT: INCORRECT"])
    record = await OlympiadTrack({"judge_retries": 1}).run_sample(PENDULUM, 0, make_ctx(model, judge))
    assert record.outcome is Outcome.INCORRECT
    assert record.judge is not None and len(record.judge.replies) == 2
    assert record.judge.parse_error is not None and "I think it's wrong" in record.judge.parse_error


async def test_judge_endpoint_failure_is_judge_error() -> None:
    model = ListClient(["FINAL ANSWER: 7.9"])
    judge = ListClient([EndpointRefused("401 bad key", kind="auth")])
    record = await OlympiadTrack().run_sample(PENDULUM, 0, make_ctx(model, judge))
    assert record.outcome is Outcome.JUDGE_ERROR and len(judge.requests) == 1
    assert record.error == "judge model failed: 401 bad key"
    # Failing on the placeholder answer too, the endpoint is down: still the judge's error.
    model = ListClient(["FINAL ANSWER: 7.9"])
    judge = ListClient([ModelError("gave up after 6 retries")] * 2)
    record = await OlympiadTrack().run_sample(PENDULUM, 0, make_ctx(model, judge))
    assert record.outcome is Outcome.JUDGE_ERROR and len(judge.requests) == 2
    assert record.error == "judge model failed: gave up after 6 retries"


async def test_model_failure_is_model_error_and_no_judge_call() -> None:
    judge = ListClient([])
    record = await OlympiadTrack().run_sample(PENDULUM, 0, make_ctx(ListClient([ModelError("quota")]), judge))
    assert record.outcome is Outcome.MODEL_ERROR and record.error == "model failed: quota"
    assert judge.requests == []


async def test_empty_response_is_no_submission() -> None:
    judge = ListClient([])
    record = await OlympiadTrack().run_sample(PENDULUM, 0, make_ctx(ListClient([None]), judge))
    assert record.outcome is Outcome.NO_SUBMISSION and judge.requests == []


async def test_missing_judge_is_judge_error() -> None:
    record = await OlympiadTrack().run_sample(PENDULUM, 0, make_ctx(ListClient(["FINAL ANSWER: 1"]), None))
    assert record.outcome is Outcome.JUDGE_ERROR and "no judge model configured" in (record.error or "")


@pytest.mark.parametrize(
    ("reply", "points", "success"),
    [("VERDICT: 8", 8.0, True), ("VERDICT: 7", 7.0, True), ("VERDICT: 6.5", 6.5, False)],
)
async def test_research_points_and_threshold(reply: str, points: float, success: bool) -> None:
    judge = ListClient([f"Item 1: met.\n{reply}"])
    record = await ResearchTrack().run_sample(RUBRIC_TASK, 1, make_ctx(ListClient(["My design."]), judge))
    assert record.score == points and record.success is success
    assert record.outcome is (Outcome.CORRECT if success else Outcome.INCORRECT)
    assert record.judge is not None and record.judge.points == points
    content = judge.requests[0][0]["content"]
    assert "The rubric: Points: 10, Item: all\n***\nThe attempted answer: My design.\n***" in content


async def test_research_prompt_is_the_problem_text_by_default() -> None:
    model = ListClient(["answer"])
    await ResearchTrack().run_sample(RUBRIC_TASK, 0, make_ctx(model, ListClient(["VERDICT: 1"])))
    assert model.requests[0] == [{"role": "user", "content": "Design the experiment."}]


async def test_research_threshold_is_configurable_and_out_of_range_is_judge_error() -> None:
    record = await ResearchTrack({"success_threshold": 5}).run_sample(
        RUBRIC_TASK, 0, make_ctx(ListClient(["a"]), ListClient(["VERDICT: 5"]))
    )
    assert record.success
    judge = ListClient(["VERDICT: 11", "VERDICT: -1", "VERDICT: 10.5"] * 2)
    record = await ResearchTrack().run_sample(RUBRIC_TASK, 0, make_ctx(ListClient(["a"]), judge))
    assert record.outcome is Outcome.JUDGE_ERROR and len(judge.requests) == 6 and record.score == 0.0


def test_options_are_validated_and_python_tool_needs_a_sandbox() -> None:
    with pytest.raises(UserError, match="field 'pyhton_tool'"):
        make_track("olympiad", {"pyhton_tool": True})
    with pytest.raises(UserError, match="field 'success_threshold'"):
        make_track("research", {"success_threshold": 11})
    assert make_track("olympiad").needs_sandbox is False
    assert make_track("olympiad", {"python_tool": True}).needs_sandbox is True
    assert make_track("research").needs_sandbox is False


@pytest.mark.parametrize(
    "response",
    [r"So $v = \boxed{6.69}$ m/s.", "Thus:\n\n**Final Answer:** 6.69", "final answer: 6.7"],
)
async def test_final_answer_markers_feed_the_precheck(response: str) -> None:
    judge = ListClient([])
    record = await OlympiadTrack(PRECHECK).run_sample(PENDULUM, 0, make_ctx(ListClient([response]), judge))
    assert record.outcome is Outcome.CORRECT and judge.requests == []


async def test_run_config_prompt_template_overrides_the_answer_prompt(tmp_path: Path) -> None:
    template = tmp_path / "answer.txt"
    template.write_text("Solve carefully:\n{problem}\nEnd with FINAL ANSWER.\n", encoding="utf-8")
    model = ListClient(["FINAL ANSWER: 6.7"])
    ctx = make_ctx(model, ListClient([]), prompt_template=template, max_output_tokens=512)
    await OlympiadTrack(PRECHECK).run_sample(PENDULUM, 0, ctx)
    assert (
        model.requests[0][0]["content"]
        == "Solve carefully:\nWhat is the period ratio?\nEnd with FINAL ANSWER."
    )


def test_a_run_recorded_with_the_precheck_on_is_not_resumed_with_it_off() -> None:
    """Before the pre-check became opt-in, an olympiad run with no ``precheck`` option ran it;
    resuming such a run under today's default would mix two grading procedures."""
    from proctor.agent.results.store import resume_conflicts

    def header(precheck: bool) -> dict[str, object]:
        return {"track": "olympiad", "config": {}, "track_settings": {"precheck": precheck}}

    (conflict,) = resume_conflicts(header(True), header(False))
    assert "pre-check was on, now off" in conflict and "track_options.precheck" in conflict
    assert resume_conflicts(header(True), header(True)) == []
    assert resume_conflicts(header(False), header(False)) == []
    # Other tracks record no pre-check; nothing to compare.
    assert resume_conflicts({"track": "research", "config": {}}, {"track": "research", "config": {}}) == []
