"""The live panel's time left and running cost (issue 24), driven by a fake clock and fabricated
progress events: what a user reads on the panel, rendered as text."""

from __future__ import annotations

import io
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from proctor.agent.results.records import JudgeRecord, Outcome, SampleRecord
from proctor.agent.results.summary import summarize_group
from proctor.agent.run.progress import NO_ESTIMATE, Pricing, RunProgress

MODEL = "openai/m"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def render(progress: RunProgress) -> str:
    console = Console(file=io.StringIO(), width=160, color_system=None)
    console.print(progress)
    return console.file.getvalue()  # type: ignore[attr-defined]


def eta_of(progress: RunProgress) -> str:
    found = re.search(r"ETA (\S+(?: \S+s)?)", render(progress))
    assert found is not None
    return found.group(1)


def record(
    task: str, *, model: str = MODEL, tokens: tuple[int, int] = (0, 0), judge: JudgeRecord | None = None
) -> SampleRecord:
    return SampleRecord(
        run_id="r",
        track="frontiermath",
        task_id=task,
        trial=0,
        model=model,
        outcome=Outcome.CORRECT,
        success=True,
        input_tokens=tokens[0],
        output_tokens=tokens[1],
        total_tokens=sum(tokens),
        judge=judge,
        started_at="2026-12-01T00:00:00+00:00",
        finished_at="2026-12-01T00:00:01+00:00",
        # Deliberately unlike the clock's times: the panel times samples itself.
        duration_s=9999.0,
    )


def start(progress: RunProgress, task: str, model: str = MODEL) -> None:
    # The runner's order: the sample's events view, then the start.
    progress.for_sample(model, task, 0)
    progress.sample_started()


def test_the_time_left_is_a_dash_until_enough_samples_finished_then_counts_down() -> None:
    clock = Clock()
    progress = RunProgress(Console(file=io.StringIO()), live=False, clock=clock)
    progress.begin(total=10, already_done=[], run_dir="run")
    assert eta_of(progress) == NO_ESTIMATE
    # Two at a time, each sample 100 s.
    start(progress, "t0")
    start(progress, "t1")
    clock.now = 100.0
    for index in (0, 1):
        progress.sample_finished(record(f"t{index}"))
    start(progress, "t2")
    start(progress, "t3")
    assert eta_of(progress) == NO_ESTIMATE  # two finished: not yet enough to say
    clock.now = 200.0
    progress.sample_finished(record("t2"))
    start(progress, "t4")
    # Mean 100 s; 5 queued (500 s) + t3 done now (0 s) + t4 fresh (100 s) over 2 slots.
    assert eta_of(progress) == "5m 00s"
    clock.now = 230.0
    # Nothing finished: the estimate counts down with the clock (t4 has 70 s left).
    assert eta_of(progress) == "4m 45s"
    clock.now = 10_000.0
    # Running samples long past the mean never make the time left negative.
    assert eta_of(progress) == "4m 10s"  # 5 queued x 100 s over 2 slots; the running ones add 0


def test_concurrency_shares_out_the_work_left() -> None:
    def eta_with(parallel: int) -> float | None:
        clock = Clock()
        progress = RunProgress(Console(file=io.StringIO()), live=False, clock=clock)
        progress.begin(total=40, already_done=[], run_dir="run")
        for index in range(parallel):
            start(progress, f"t{index}")
        clock.now = 60.0
        for index in range(parallel):
            progress.sample_finished(record(f"t{index}"))
        for index in range(parallel, 2 * parallel):
            start(progress, f"t{index}")
        return progress.eta_seconds()

    # 16 in flight at once get through the 40 samples four times as fast as 4 do.
    four, sixteen = eta_with(4), eta_with(16)
    assert four is not None and sixteen is not None
    assert four == pytest.approx(40 * 60 / 4 - 60) and sixteen == pytest.approx(40 * 60 / 16 - 60)


def test_the_last_running_sample_bounds_the_time_left() -> None:
    clock = Clock()
    progress = RunProgress(Console(file=io.StringIO()), live=False, clock=clock)
    progress.begin(total=4, already_done=[], run_dir="run")
    for index in range(3):
        start(progress, f"t{index}")
    clock.now = 10.0
    start(progress, "t3")
    clock.now = 40.0
    for index in range(3):
        progress.sample_finished(record(f"t{index}"))
    # The last sample has 10 s left of the mean 40 s: 10 s, not 10 s shared by 4 slots.
    assert eta_of(progress) == "10s"
    clock.now = 50.0
    assert eta_of(progress) == "0s"
    clock.now = 500.0
    assert eta_of(progress) == "0s"  # overdue: never less than nothing


def test_resumed_samples_do_not_count_as_this_sessions_pace() -> None:
    clock = Clock()
    progress = RunProgress(Console(file=io.StringIO()), live=False, clock=clock)
    progress.begin(total=6, already_done=[record(f"old{i}") for i in range(3)], run_dir="run")
    # Three finished, but in another session: no pace measured yet.
    assert eta_of(progress) == NO_ESTIMATE
    start(progress, "t0")
    clock.now = 30.0
    progress.sample_finished(record("t0"))
    start(progress, "t1")
    # Three to run this session, one finished: too few to say.
    assert eta_of(progress) == NO_ESTIMATE
    clock.now = 60.0
    progress.sample_finished(record("t1"))
    start(progress, "t2")
    clock.now = 70.0
    assert eta_of(progress) == "20s"


def test_rescores_without_sample_rows_are_timed_from_their_starts() -> None:
    clock = Clock()
    progress = RunProgress(Console(file=io.StringIO()), live=False, clock=clock)
    progress.begin(total=5, already_done=[], run_dir="run")
    for index in range(3):
        progress.sample_started()
        clock.now += 10.0
        progress.sample_finished(record(f"t{index}"))
    progress.sample_started()
    assert progress.eta_seconds() == pytest.approx(20.0)  # 1 queued + 1 fresh, 10 s each, 1 slot


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["start", "finish", "tick"]), st.floats(0, 5_000)), max_size=60),
    st.integers(1, 30),
)
def test_the_time_left_is_never_negative_and_never_jumps_up_on_a_tick(
    steps: list[tuple[str, float]], total: int
) -> None:
    clock = Clock()
    progress = RunProgress(Console(file=io.StringIO()), live=False, clock=clock)
    progress.begin(total=total, already_done=[], run_dir="run")
    started = finished = 0
    for action, amount in steps:
        if action == "start" and started < total:
            start(progress, f"t{started}")
            started += 1
        elif action == "finish" and finished < started:
            progress.sample_finished(record(f"t{finished}"))
            finished += 1
        elif action == "tick":
            before = progress.eta_seconds()
            clock.now += amount
            after = progress.eta_seconds()
            # Time passing alone only ever brings the end nearer.
            if before is not None and after is not None:
                assert after <= before + 1e-9
        eta = progress.eta_seconds()
        assert eta is None or eta >= 0
        assert "ETA -" not in render(progress)


def _judged(tokens: tuple[int, int]) -> JudgeRecord:
    return JudgeRecord(
        decided_by="judge", model="openai/judge", input_tokens=tokens[0], output_tokens=tokens[1]
    )


def test_the_running_cost_adds_model_and_judge_as_the_summary_does() -> None:
    pricing = Pricing(
        models={MODEL: (2.0, 8.0), "openai/n": (1.0, 1.0)},
        labels=[MODEL, "openai/n"],
        judge=(0.5, 4.0),
        judged=True,
    )
    resumed = [record("old", tokens=(500_000, 10_000), judge=_judged((1_000, 100)))]
    progress = RunProgress(Console(file=io.StringIO()), live=False, clock=Clock())
    progress.begin(total=4, already_done=resumed, run_dir="run", pricing=pricing)
    # The earlier session's sample: 1.0 + 0.08 model, 0.0005 + 0.0004 judge.
    assert "cost $1.0809" in render(progress)
    finished = [
        record("a", tokens=(1_000_000, 50_000), judge=_judged((20_000, 2_000))),
        record("b", model="openai/n", tokens=(100_000, 100_000)),
    ]
    for item in finished:
        start(progress, item.task_id, item.model)
        progress.sample_finished(item)
    summary = summarize_group(
        [*resumed, *finished], prices=pricing.models, judge_prices=pricing.judge, resamples=10
    )
    assert progress.cost_usd == pytest.approx(summary["total_cost_usd"])
    # 1.0809 + (2.0 + 0.4 + 0.01 + 0.008) + (0.1 + 0.1)
    assert "cost $3.6989" in render(progress)


def test_no_prices_no_word_about_cost() -> None:
    progress = RunProgress(Console(file=io.StringIO()), live=False, clock=Clock())
    progress.begin(
        total=2, already_done=[], run_dir="run", pricing=Pricing(models={}, labels=[MODEL], judge=None)
    )
    start(progress, "a")
    progress.sample_finished(record("a", tokens=(1_000, 1_000)))
    assert "cost" not in render(progress)
    # Nor when the caller (rescore, the API's quiet runs) gives no pricing at all.
    bare = RunProgress(Console(file=io.StringIO()), live=False, clock=Clock())
    bare.begin(total=1, already_done=[], run_dir="run")
    assert "cost" not in render(bare)


@pytest.mark.parametrize(
    ("pricing", "missing"),
    [
        # A second model without prices.
        (Pricing(models={MODEL: (1.0, 1.0)}, labels=[MODEL, "openai/n"]), "openai/n"),
        # Only the input price known.
        (Pricing(models={MODEL: (1.0, None)}, labels=[MODEL]), MODEL),
        # A judged track whose judge sets no price.
        (Pricing(models={MODEL: (1.0, 1.0)}, labels=[MODEL], judge=None, judged=True), "judge"),
    ],
)
def test_partly_known_prices_give_no_total(pricing: Pricing, missing: str) -> None:
    progress = RunProgress(Console(file=io.StringIO()), live=False, clock=Clock())
    progress.begin(total=2, already_done=[], run_dir="run", pricing=pricing)
    panel = render(progress)
    assert "$" not in panel and f"cost unknown (no prices for {missing})" in panel


def test_a_judge_asked_without_a_price_makes_the_cost_unknown() -> None:
    # The config did not say the track asks a judge; a finished sample shows it did.
    pricing = Pricing(models={MODEL: (1.0, 1.0)}, labels=[MODEL])
    progress = RunProgress(Console(file=io.StringIO()), live=False, clock=Clock())
    progress.begin(total=3, already_done=[], run_dir="run", pricing=pricing)
    start(progress, "a")
    progress.sample_finished(record("a", tokens=(1_000_000, 0)))
    assert "cost $1.0000" in render(progress)
    start(progress, "b")
    progress.sample_finished(record("b", tokens=(1_000_000, 0), judge=_judged((10, 10))))
    panel = render(progress)
    assert "$" not in panel and "cost unknown (no prices for judge)" in panel
