"""pass@k: the estimator against brute-force enumeration, and the per-task grid in summary.json."""

from __future__ import annotations

import io
import itertools
import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from proctor.agent.results.passk import pass_at_every_k, pass_at_k, task_grid
from proctor.agent.results.records import Outcome, SampleRecord
from proctor.agent.results.summary import summarize, summarize_group
from proctor.agent.run.progress import print_final

STAMP = "2026-12-01T00:00:00+00:00"


def enumerated(n: int, c: int, k: int) -> Fraction:
    """The share of all k-subsets of n trials (the first c successes) holding a success."""
    subsets = list(itertools.combinations(range(n), k))
    return Fraction(sum(1 for s in subsets if any(i < c for i in s)), len(subsets))


@st.composite
def trials(draw: st.DrawFn, max_n: int = 12) -> tuple[int, int, int]:
    n = draw(st.integers(1, max_n))
    return n, draw(st.integers(0, n)), draw(st.integers(1, n))


@settings(max_examples=300, deadline=None)
@given(trials())
def test_pass_at_k_equals_brute_force_enumeration(case: tuple[int, int, int]) -> None:
    n, c, k = case
    exact = enumerated(n, c, k)
    assert pass_at_k(n, c, k) == float(exact)


@settings(max_examples=200, deadline=None)
@given(trials(max_n=400))
def test_pass_at_k_is_exact_to_rounding_for_large_n(case: tuple[int, int, int]) -> None:
    """Against the closed form in exact rationals: the exact value, correctly rounded, for any n."""
    n, c, k = case
    exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
    assert pass_at_k(n, c, k) == float(exact)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 150).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))))
def test_every_k_at_once_equals_one_k_at_a_time(case: tuple[int, int]) -> None:
    n, c = case
    assert pass_at_every_k(n, c) == tuple(pass_at_k(n, c, k) for k in range(1, n + 1))


def test_many_trials_stay_fast() -> None:
    import time

    started = time.process_time()
    values = pass_at_every_k(3000, 1000)
    # About 4 ms here; math.comb from scratch for every k took 1.7 s.
    assert time.process_time() - started < 1.0
    assert values[0] == 1000 / 3000 and values[-1] == 1.0


@settings(max_examples=200, deadline=None)
@given(trials(max_n=60))
def test_pass_at_k_properties(case: tuple[int, int, int]) -> None:
    n, c, k = case
    assert pass_at_k(n, c, 1) == pytest.approx(c / n, rel=1e-15)
    assert pass_at_k(n, c, n) == (1.0 if c else 0.0)
    if k < n:
        assert pass_at_k(n, c, k + 1) >= pass_at_k(n, c, k)


def test_pass_at_k_tiny_probabilities_do_not_cancel() -> None:
    # One success in 10,000 trials, k = 1: 1 - (9999/10000) in floats loses digits; this does not.
    assert pass_at_k(10_000, 1, 1) == 1e-4
    assert pass_at_k(10**6, 1, 1) == 1e-6


def test_pass_at_k_rejects_impossible_arguments() -> None:
    for n, c, k in ((3, 4, 1), (3, -1, 1), (3, 1, 0), (3, 1, 4)):
        with pytest.raises(ValueError):
            pass_at_k(n, c, k)


def record(task: str, trial: int, outcome: Outcome, *, model: str = "m") -> SampleRecord:
    return SampleRecord(
        run_id="r",
        track="olympiad",
        task_id=task,
        trial=trial,
        model=model,
        subject="physics",
        outcome=outcome,
        success=outcome == Outcome.CORRECT,
        score=float(outcome == Outcome.CORRECT),
        started_at=STAMP,
        finished_at=STAMP,
        duration_s=1.0,
    )


C, X, E = Outcome.CORRECT, Outcome.INCORRECT, Outcome.JUDGE_ERROR
# Task a: 2 of 3 correct. Task b: 0 of 2 scored (one judge error). Task c: 1 of 3.
GRID = {"a": (C, C, X), "b": (X, E, X), "c": (X, C, X)}
RECORDS = [record(task, trial, o) for task, outcomes in GRID.items() for trial, o in enumerate(outcomes)]


def test_group_pass_at_k_excludes_errors_like_primary_accuracy() -> None:
    group = summarize_group(RECORDS)
    k = group["pass_at_k"]["k"]
    assert set(k) == {"1", "2", "3"}
    # pass@1 is the primary accuracy: mean over tasks of correct/scored.
    assert k["1"]["mean"] == pytest.approx((2 / 3 + 0 / 2 + 1 / 3) / 3)
    assert k["1"]["mean"] == pytest.approx(group["accuracy"]["mean"])
    assert k["1"]["tasks"] == 3
    # pass@2: a = 1 - C(1,2)/C(3,2) = 1, b = 1 - C(2,2)/C(2,2) = 0, c = 1 - C(2,2)/C(3,2) = 2/3.
    assert k["2"]["mean"] == pytest.approx((1 + 0 + 2 / 3) / 3) and k["2"]["tasks"] == 3
    # pass@3: task b has only two scored trials, so it has no estimate and is left out.
    assert k["3"]["mean"] == pytest.approx(1.0) and k["3"]["tasks"] == 2
    assert group["pass_at_k"]["errors"] == "excluded from n"


def test_models_are_never_pooled_into_one_task() -> None:
    """Model A always right, B always wrong on one task: pass@2 is 0.5, not 1 (a pooled pair)."""
    records = [record("t", trial, C, model="A") for trial in range(2)]
    records += [record("t", trial, X, model="B") for trial in range(2)]
    group = summarize_group(records)
    assert group["pass_at_k"]["k"]["2"]["mean"] == 0.5
    rows = task_grid(records)
    assert [(r.model, r.n, r.c) for r in rows] == [("A", 2, 2), ("B", 2, 0)]


def test_summary_json_holds_the_trials_by_task_grid() -> None:
    summary = summarize(RECORDS)
    block = summary["tasks"]["m"]
    assert block["trials"] == [0, 1, 2]
    grid = {row["task_id"]: row for row in block["grid"]}
    assert grid["b"]["trials"] == {"0": "incorrect", "1": "judge_error", "2": "incorrect"}
    assert (grid["b"]["scored"], grid["b"]["correct"], grid["b"]["errors"]) == (2, 0, 1)
    assert grid["b"]["pass_at_k"] == {"1": 0.0, "2": 0.0, "3": None}
    assert grid["a"]["pass_at_k"]["2"] == 1.0
    assert block["pass_at_k"] == summarize_group(RECORDS)["pass_at_k"]


def test_cli_summary_prints_pass_at_k_and_the_grid() -> None:
    out = io.StringIO()
    print_final(Console(file=out, width=200), summarize(RECORDS), "runs/x")
    text = out.getvalue()
    assert "pass@k" in text and "k=3" in text
    assert "100.0% (2)" in text  # pass@3 over the two tasks that have three scored trials
    assert "✓✓✗" in text and "✗E✗" in text and "✗✓✗" in text
    assert "0/2" in text


def test_cli_tables_print_hostile_names_as_text() -> None:
    name = "[bold red]m[/] \x1b[31mred\x1b[0m"
    records = [record(f"task {name}", 0, C, model=name), record("t", 0, X, model="other")]
    out = io.StringIO()
    print_final(Console(file=out, width=300), summarize(records), "runs/x")
    text = out.getvalue()
    assert "\x1b" not in text  # the escape is shown, not obeyed (no colour on a plain console)
    assert "\\x1b[31mred" in text and "[bold red]m[/]" in text


def test_judge_usage_counts_only_samples_a_judge_was_asked_about() -> None:
    from proctor.agent.results.records import JudgeRecord

    asked = record("a", 0, C).model_copy(
        update={
            "judge": JudgeRecord(decided_by="judge", model="j", replies=["VERDICT: CORRECT"], input_tokens=7)
        }
    )
    failed = record("b", 0, E).model_copy(update={"judge": JudgeRecord(decided_by="judge", model="j")})
    settled = record("c", 0, C).model_copy(update={"judge": JudgeRecord(decided_by="precheck")})
    no_judge = record("d", 0, E).model_copy(update={"judge": JudgeRecord(decided_by="judge")})
    judge = summarize_group([asked, failed, settled, no_judge], judge_prices=(1.0, None))["judge"]
    assert (judge["samples_judged"], judge["attempts"], judge["input_tokens"]) == (2, 1, 7)
    assert judge["cost_usd"] == 7 / 1e6


@pytest.mark.parametrize("width", [80, 100])
def test_the_pass_at_k_title_is_one_line_and_its_meaning_one_more(width: int) -> None:
    # Issue 38, item 10: the title wrapped to four lines of a narrow table in the terminal.
    out = io.StringIO()
    print_final(Console(file=out, width=width), summarize(RECORDS), "runs/x")
    lines = out.getvalue().splitlines()
    top = next(i for i, line in enumerate(lines) if "k=1" in line) - 1  # the table's top border
    assert lines[top - 1].strip() == "pass@k (unbiased)", lines[top - 3 : top + 1]
    assert lines[top - 2].strip() == "" or "pass@k" not in lines[top - 2]
    notes = [line for line in lines if "tasks with fewer scored trials than k" in line]
    assert len(notes) == 1 and "error outcomes are left out of n" in notes[0]
