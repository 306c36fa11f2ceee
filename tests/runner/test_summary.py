"""Summary statistics checked against values worked out by hand."""

from __future__ import annotations

import math

import pytest

from proctor.agent.results import task_stats as stats
from proctor.agent.results.records import (
    EEDRecord,
    JudgeRecord,
    Outcome,
    SampleRecord,
    ToolCallRecord,
    TurnUsage,
)
from proctor.agent.results.summary import summarize, summarize_group
from proctor.agent.results.task_stats import bootstrap_ci, clustered_estimate, percentile, standard_error


def rec(
    task: str,
    trial: int,
    outcome: str,
    *,
    subject: str | None = None,
    model: str = "openai/m",
    effort: str | None = None,
    points: float | None = None,
    eed: float | None = None,
    tokens: tuple[int, int] = (100, 10),
) -> SampleRecord:
    success = outcome == "correct" if points is None else points >= 7
    return SampleRecord(
        run_id="r",
        track="research" if points is not None else "frontiermath",
        task_id=task,
        trial=trial,
        model=model,
        subject=subject,
        reasoning_effort=effort,
        outcome=Outcome(outcome),
        score=points if points is not None else float(success),
        success=success,
        input_tokens=tokens[0],
        output_tokens=tokens[1],
        total_tokens=sum(tokens),
        judge=JudgeRecord(decided_by="judge", points=points) if points is not None else None,
        eed=EEDRecord(score=eed) if eed is not None else None,
        started_at="s",
        finished_at="f",
        duration_s=2.0,
    )


# Task A: 2/2 correct; B: 1/2; C: 0/2 plus a judge error on a third trial.
RECORDS = [
    rec("A", 0, "correct", subject="algebra"),
    rec("A", 1, "correct", subject="algebra"),
    rec("B", 0, "correct", subject="algebra"),
    rec("B", 1, "incorrect", subject="algebra"),
    rec("C", 0, "incorrect", subject="geometry"),
    rec("C", 1, "answer_error", subject="geometry"),
    rec("C", 2, "judge_error", subject="geometry"),
]


def test_accuracy_is_mean_of_task_means_with_task_clustered_se_errors_excluded():
    group = summarize_group(RECORDS)
    accuracy = group["accuracy"]
    # Task means (errors excluded): A 1, B 0.5, C 0 -> 0.5; sd = 0.5 -> SE = 0.5 / sqrt(3).
    assert accuracy["mean"] == pytest.approx(0.5)
    assert accuracy["se"] == pytest.approx(0.5 / math.sqrt(3))
    # Per-sample SE over [1,1,1,0,0,0]: variance 0.3 (ddof 1) -> sqrt(0.3 / 6).
    assert accuracy["se_samples"] == pytest.approx(math.sqrt(0.3 / 6))
    assert (accuracy["n_samples"], accuracy["n_tasks"]) == (6, 3)
    assert group["scored_samples"] == 6


def test_errors_are_counted_apart_and_also_reported_as_failures():
    group = summarize_group(RECORDS)
    assert group["errors"] == {
        "harness_error": 0,
        "judge_error": 1,
        "model_error": 0,
        "verify_error": 0,
        "total": 1,
    }
    assert group["outcomes"] == {"correct": 3, "incorrect": 2, "answer_error": 1, "judge_error": 1}
    as_failures = group["accuracy_errors_as_failures"]
    # C becomes 0/3, still task mean 0: the task-level mean stays 0.5 ...
    assert as_failures["mean"] == pytest.approx(0.5)
    # ... while the per-sample SE now sees 7 samples, 3 of them successes: var = 84/294.
    assert as_failures["se_samples"] == pytest.approx(math.sqrt((84 / 294) / 7))
    assert as_failures["n_samples"] == 7


def test_breakdowns_by_subject_model_and_effort():
    records = [*RECORDS, rec("A", 0, "incorrect", subject="algebra", model="openai/n", effort="high")]
    summary = summarize(records, seed=1)
    assert summary["by_subject"]["algebra"]["accuracy"]["mean"] == pytest.approx(
        (2 / 3 + 1 / 2) / 2
    )  # A: 2 of 3 over both models
    assert summary["by_subject"]["geometry"]["accuracy"]["mean"] == 0.0
    assert summary["by_subject"]["geometry"]["errors"]["judge_error"] == 1
    assert summary["by_model"]["openai/m"]["accuracy"]["mean"] == pytest.approx(0.5)
    assert summary["by_model"]["openai/n"]["accuracy"]["mean"] == 0.0
    assert set(summary["by_reasoning_effort"]) == {"(default)", "high"}
    assert summary["by_model_subject"]["openai/m"]["algebra"]["accuracy"]["mean"] == pytest.approx(0.75)
    assert summary["finished_samples"] == 8


@pytest.mark.parametrize("engine", ["numpy", "python"])
def test_bootstrap_resamples_tasks_reproducibly(engine: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(stats, "bootstrap_engine", lambda: engine)
    # Two tasks at 0 and 1: a resampled mean is 0 w.p. 1/4, so both 2.5% tails sit on 0 and 1.
    assert bootstrap_ci([0.0, 1.0], seed=3) == (0.0, 1.0)
    # One task: every resample is that task.
    assert bootstrap_ci([0.25], seed=3) == (0.25, 0.25)
    values = [(i * 37 % 101) / 100 for i in range(40)]
    first, again, other = (
        bootstrap_ci(values, seed=7),
        bootstrap_ci(values, seed=7),
        bootstrap_ci(values, seed=8),
    )
    assert first == again and first != other
    assert first[0] < sum(values) / len(values) < first[1]
    # Clustering: ten trials of one task do not shrink the interval of a two-task run.
    clustered = clustered_estimate({"x": [0.0] * 10, "y": [1.0] * 10}, seed=0)
    assert clustered is not None and (clustered.ci95_low, clustered.ci95_high) == (0.0, 1.0)
    assert clustered.se == pytest.approx(0.5) and clustered.se_samples == pytest.approx(
        math.sqrt(20 / 76 / 20)
    )


def test_summaries_are_reproducible_for_the_same_seed():
    first, second = summarize(RECORDS, seed=11), summarize(RECORDS, seed=11)
    for payload in (first, second):
        payload.pop("generated_at")
    assert first == second


def test_percentile_interpolates_linearly_like_numpy():
    assert percentile([0.0, 10.0], 0.25) == 2.5
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 0.975) == pytest.approx(4.9)
    assert standard_error([1.0]) is None
    assert standard_error([1.0, 3.0]) == pytest.approx(1.0)


def test_research_points_eed_tokens_and_cost():
    records = [
        rec("P", 0, "correct", points=8.0, eed=60.0, tokens=(1_000_000, 0)),
        rec("P", 1, "incorrect", points=6.0, eed=20.0, tokens=(0, 1_000_000)),
        rec("Q", 0, "correct", points=10.0, tokens=(0, 0)),
        rec("Q", 1, "judge_error"),
    ]
    group = summarize_group(records, prices={"openai/m": (2.0, 8.0)})
    # Points per task: P (8+6)/2 = 7, Q 10 -> 8.5, SE = sd([7, 10]) / sqrt(2) = 1.5. Judge error excluded.
    assert group["points"]["mean"] == pytest.approx(8.5)
    assert group["points"]["se"] == pytest.approx(1.5)
    # Success at >= 7: P 1/2, Q 1/1 -> 0.75.
    assert group["accuracy"]["mean"] == pytest.approx(0.75)
    # EED over the two samples that have it, both on task P: 40.
    assert group["eed"]["mean"] == pytest.approx(40.0) and group["eed"]["n_samples"] == 2
    assert group["tokens"]["input"] == 1_000_100 and group["tokens"]["output"] == 1_000_010
    assert group["cost_usd"] == pytest.approx(2.0 * 1_000_100 / 1e6 + 8.0 * 1_000_010 / 1e6)
    assert summarize_group(records)["cost_usd"] is None


def test_empty_run_summarises_without_dividing_by_zero():
    summary = summarize([])
    assert summary["overall"]["samples"] == 0 and summary["overall"]["accuracy"] is None


def _with_sandbox(record: SampleRecord, duration_s: float, call_seconds: list[float]) -> SampleRecord:
    calls = [
        ToolCallRecord(
            turn=i, call_id=f"c{i}", name="python", raw_arguments="{}", duration_s=s, sandbox={"exit_code": 0}
        )
        for i, s in enumerate(call_seconds)
    ]
    return record.model_copy(update={"duration_s": duration_s, "tool_calls": calls})


def test_the_sandbox_share_of_each_samples_wall_time_is_summarised() -> None:
    records = [
        _with_sandbox(rec("A", 0, "correct"), 10.0, [1.0, 2.0]),  # 30 %
        _with_sandbox(rec("B", 0, "correct"), 30.0, [3.0]),  # 10 %
        _with_sandbox(rec("C", 0, "correct"), 4.0, []),  # 0 %
    ]
    share = summarize_group(records)["sandbox_wall_share"]
    assert share["overall"] == pytest.approx(6.0 / 44.0)
    assert share["median_sample"] == pytest.approx(0.1)
    assert share["max_sample"] == pytest.approx(0.3)


@pytest.mark.parametrize("claimed", [1e9, math.inf, math.nan, -5.0])
def test_an_edited_record_cannot_push_the_sandbox_share_outside_zero_to_one(claimed: float) -> None:
    records = [
        _with_sandbox(rec("A", 0, "correct"), 10.0, [claimed]),
        _with_sandbox(rec("B", 0, "correct"), 0.0, [1.0]),
    ]
    share = summarize_group(records)["sandbox_wall_share"]
    assert 0.0 <= share["overall"] <= 1.0 and 0.0 <= share["max_sample"] <= 1.0


def test_a_run_without_timed_samples_has_no_sandbox_share() -> None:
    assert summarize([])["overall"]["sandbox_wall_share"] == {
        "overall": None,
        "median_sample": None,
        "max_sample": None,
    }


def test_turns_are_counted_per_usage_shape_and_model_errors_grouped() -> None:
    """summary.json: how each turn's usage was reported (agent/model/usage.py), and the model
    errors grouped by status and message, numbers read as N."""

    def turn(shape: str | None) -> TurnUsage:
        return TurnUsage(turn=1, input_tokens=1, output_tokens=1, cumulative_tokens=2, usage_shape=shape)

    shaped = rec("t1", 0, "correct").model_copy(
        update={"turns": [turn("reasoning_outside_output"), turn("reasoning_outside_output"), turn(None)]}
    )
    openai = rec("t2", 0, "incorrect").model_copy(update={"turns": [turn("reasoning_in_output")]})
    rejected = "model error: http://h/v1 rejected the request (HTTP 400): bad value"
    errors = [
        rec(f"e{i}", 0, "model_error").model_copy(update={"error": f"{rejected} {i * 1000}"})
        for i in range(3)
    ] + [rec("e9", 0, "model_error").model_copy(update={"error": "model error: gave up after 6 retries"})]
    group = summarize_group([shaped, openai, *errors])
    # Records from before shapes were recorded (None) are not counted under any shape.
    assert group["usage_shapes"] == {"reasoning_in_output": 1, "reasoning_outside_output": 2}
    assert group["model_errors"] == [
        {"status": 400, "message": "bad value N", "samples": 3},
        {"status": None, "message": "model error: gave up after N retries", "samples": 1},
    ]
