"""PHYBench strict mode's time limits default to the published ones (issue 11, item 5).

The published scorer gives each simplify 30 s and equals 10 s, then carries on with its
fallback; it has no overall limit. Our hard per-pair budget must therefore leave room for every
limited step to reach its own limit, or pairs the published scorer finishes would score 0 here.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from proctor.agent.scoring import eed
from proctor.agent.scoring.eed import eed_score, published_pair_budget_s
from proctor.agent.scoring.eed_pipeline import LIMITED_STEPS
from proctor.agent.scoring.worker_pool import EEDWorkerPool, ScoredPair, StepLimits
from proctor.agent.tracks.phybench import PhybenchTrack
from proctor.agent.tracks.registry import make_track


class BudgetRecorder(EEDWorkerPool):
    """A pool that records the budget and step limits it is handed, and scores nothing."""

    def __init__(self) -> None:
        super().__init__(size=1)
        self.calls: list[tuple[float, StepLimits]] = []

    def score(
        self, reference: str, answer: str, mode: str, budget_s: float, limits: StepLimits
    ) -> ScoredPair:
        self.calls.append((budget_s, limits))
        return ScoredPair({"status": "ok", "score": 50.0}, wall_s=0.0, attempts=1)


def test_the_published_step_limits_are_the_defaults() -> None:
    for function in (eed.eed_score, eed.eed_score_async):
        parameters = inspect.signature(function).parameters
        assert parameters["simplify_limit_s"].default == 30.0
        assert parameters["equals_limit_s"].default == 10.0
        assert parameters["timeout_s"].default is None  # derived from the step limits


def test_the_default_budget_lets_every_limited_step_reach_its_limit() -> None:
    assert set(LIMITED_STEPS) == {"simplify_reference", "simplify_answer", "simplify_difference", "equals"}
    budget = published_pair_budget_s()
    # Three simplifies at 30 s and equals at 10 s, each abandoned at its limit, still fit.
    assert budget >= 3 * 30.0 + 10.0
    assert budget == 120.0
    # Scaled limits scale the budget: it is derived, not a second constant to keep in step.
    assert published_pair_budget_s(1.0, 0.5) == 3 * 1.0 + 0.5 + eed.UNLIMITED_STEPS_ALLOWANCE_S


def test_eed_score_hands_the_pool_the_published_budget_unless_told_otherwise() -> None:
    pool = BudgetRecorder()
    eed_score("x+1", "x+2", pool=pool)
    eed_score("x+1", "x+2", pool=pool, timeout_s=4.0)
    eed_score("x+1", "x+2", pool=pool, mode="fixed")
    (default_budget, default_limits), (tight_budget, _), (fixed_budget, _) = pool.calls
    assert default_budget == 120.0 and (default_limits.simplify_s, default_limits.equals_s) == (30.0, 10.0)
    assert tight_budget == 4.0
    assert fixed_budget == 120.0


@pytest.mark.parametrize(
    ("options", "budget", "source"),
    [({}, 120.0, "published step limits"), ({"eed_timeout_s": 7.5}, 7.5, "option")],
)
def test_the_track_uses_and_records_the_effective_budget(
    options: dict[str, Any], budget: float, source: str
) -> None:
    track = make_track("phybench", options)
    assert isinstance(track, PhybenchTrack)
    assert track.pair_budget_s == budget
    settings = track.effective_settings(None)  # type: ignore[arg-type]
    assert settings["eed_pair_budget_s"] == budget and settings["eed_pair_budget_source"] == source
    assert (settings["eed_simplify_limit_s"], settings["eed_equals_limit_s"]) == (30.0, 10.0)


@pytest.mark.parametrize("bad", [0, -1, "soon"])
def test_a_nonsense_budget_is_a_config_error(bad: Any) -> None:
    with pytest.raises(Exception, match="eed_timeout_s"):
        make_track("phybench", {"eed_timeout_s": bad})


def test_a_step_over_its_limit_falls_back_under_the_default_budget(eed_pool: EEDWorkerPool) -> None:
    # simplify((x+1)^10000) runs for minutes. Limits scaled down 60x keep the test short; the
    # budget is derived from them exactly as the 30 s / 10 s defaults derive 120 s.
    eed_pool.warm_up()
    result = eed_score(
        "(x+1)^{10000}", "(x+1)^{10000}+1", simplify_limit_s=0.5, equals_limit_s=0.2, pool=eed_pool
    )
    assert result.status == "ok", result.detail
    assert result.fallbacks == ["simplify_reference", "simplify_answer"]


def test_a_tighter_budget_is_still_an_option_and_cuts_the_pair_short(eed_pool: EEDWorkerPool) -> None:
    # The old behaviour, on purpose: a budget below the step limit kills the pair before the
    # published fallback can fire.
    eed_pool.warm_up()
    result = eed_score("(x+1)^{10000}", "(x+1)^{10000}+1", simplify_limit_s=0.5, timeout_s=0.3, pool=eed_pool)
    assert result.status == "timeout" and result.score == 0.0
    assert result.fallbacks == []
