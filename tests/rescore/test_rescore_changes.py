"""The re-score's closing line: which samples' outcomes moved, per task, from what to what."""

from __future__ import annotations

from proctor.agent.rescore.changes import MAX_LISTED_TASKS, describe_moves, outcome_moves
from proctor.agent.results.records import Outcome, SampleRecord


def _record(task: str, trial: int, outcome: Outcome, model: str = "m") -> SampleRecord:
    return SampleRecord(
        run_id="r",
        track="frontiermath",
        task_id=task,
        trial=trial,
        model=model,
        outcome=outcome,
        started_at="2026-12-01T00:00:00+00:00",
        finished_at="2026-12-01T00:00:01+00:00",
        duration_s=1.0,
    )


def test_moves_are_counted_per_task_and_a_later_record_supersedes() -> None:
    before = [
        _record("t1", 0, Outcome.VERIFY_ERROR),
        _record("t1", 1, Outcome.VERIFY_ERROR),
        _record("t2", 0, Outcome.CORRECT),
        _record("t2", 0, Outcome.CORRECT, model="other"),  # another model: its own sample
        _record("t3", 0, Outcome.INCORRECT),
    ]
    after = [
        _record("t1", 0, Outcome.CORRECT),
        _record("t1", 1, Outcome.JUDGE_ERROR),
        _record("t1", 1, Outcome.CORRECT),  # a resumed re-score's later record wins
        _record("t2", 0, Outcome.INCORRECT),
        _record("t2", 0, Outcome.CORRECT, model="other"),
        _record("t4", 0, Outcome.CORRECT),  # not in the stored run: nothing to compare
    ]
    compared, moves = outcome_moves(before, after)
    assert compared == 4
    assert {task: dict(counter) for task, counter in moves.items()} == {
        "t1": {("verify_error", "correct"): 2},
        "t2": {("correct", "incorrect"): 1},
    }
    assert describe_moves(compared, moves) == (
        "outcomes moved: 3 of 4 sample(s), per task: t1: verify_error → correct 2; t2: correct → incorrect 1"
    )
    assert describe_moves(*outcome_moves(before, before)) == "outcomes moved: none of 5 sample(s)"


def test_the_line_is_bounded_however_many_tasks_moved() -> None:
    before = [_record(f"t{i:03d}", 0, Outcome.INCORRECT) for i in range(MAX_LISTED_TASKS + 5)]
    after = [_record(f"t{i:03d}", 0, Outcome.CORRECT) for i in range(MAX_LISTED_TASKS + 5)]
    line = describe_moves(*outcome_moves(before, after))
    assert line.count("→") == MAX_LISTED_TASKS and line.endswith("; and 5 more task(s)")
