"""Summary rows for the report, computed by ``proctor.agent.results.summary.summarize_group``.

Using the run summary's own function keeps the page and ``summary.json`` identical in
meaning: accuracy over scored samples only (judge, model, verifier and harness errors are counted
apart, never as wrong), task-clustered SE and bootstrap CI, cost from configured prices.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from proctor.agent.report.stats import Estimate
from proctor.agent.results.records import ERROR_OUTCOMES, Outcome, SampleRecord
from proctor.agent.results.summary import NO_EFFORT, NO_SUBJECT, JudgePrices, Prices, summarize_group

# Display order for outcomes: good, bad, then the error kinds.
OUTCOME_ORDER: tuple[Outcome, ...] = (
    Outcome.CORRECT,
    Outcome.INCORRECT,
    Outcome.ANSWER_ERROR,
    Outcome.ANSWER_TIMEOUT,
    Outcome.INVALID_SUBMISSION,
    Outcome.NO_SUBMISSION,
    Outcome.PROVIDER_REFUSAL,
    Outcome.VERIFY_ERROR,
    Outcome.JUDGE_ERROR,
    Outcome.MODEL_ERROR,
    Outcome.SCORER_TIMEOUT,
    Outcome.HARNESS_ERROR,
)

GroupKey = tuple[str, str, str | None, str | None]  # track, model, subject, effort


@dataclass
class GroupRow:
    track: str
    model: str
    subject: str | None
    reasoning_effort: str | None
    samples: int
    tasks: int
    accuracy: Estimate
    outcome_counts: Counter[str] = field(default_factory=Counter)
    error_samples: int = 0
    judge_errors: int = 0
    mean_points: float | None = None
    mean_eed: float | None = None
    total_tokens: int = 0
    cost_usd: float | None = None
    sample_time_s: float = 0.0
    judge_tokens: int = 0
    judge_cost_usd: float | None = None
    # Answering models' plus judge's cost, over whichever are priced; None when neither is.
    total_cost_usd: float | None = None
    # k -> (mean pass@k over tasks, tasks with an estimate); errors excluded from n.
    pass_at_k: dict[int, tuple[float, int]] = field(default_factory=dict)

    @property
    def label(self) -> str:
        parts = [self.subject or "all subjects"]
        if self.reasoning_effort:
            parts.append(f"effort {self.reasoning_effort}")
        return " · ".join(parts)


def is_scored(sample: SampleRecord) -> bool:
    return sample.outcome not in ERROR_OUTCOMES


def summarise(
    samples: list[SampleRecord],
    key: Callable[[SampleRecord], GroupKey],
    prices: Prices,
    judge_prices: JudgePrices | None = None,
) -> list[GroupRow]:
    groups: dict[GroupKey, list[SampleRecord]] = defaultdict(list)
    for sample in samples:
        groups[key(sample)].append(sample)
    ordered = sorted(groups.items(), key=lambda item: tuple(str(p) for p in item[0]))
    return [_row(group_key, members, prices, judge_prices) for group_key, members in ordered]


def overall_rows(
    samples: list[SampleRecord], prices: Prices, judge_prices: JudgePrices | None = None
) -> list[GroupRow]:
    return summarise(samples, lambda s: (s.track, s.model, None, None), prices, judge_prices)


def subject_rows(
    samples: list[SampleRecord], prices: Prices, judge_prices: JudgePrices | None = None
) -> list[GroupRow]:
    return summarise(
        samples, lambda s: (s.track, s.model, s.subject or NO_SUBJECT, None), prices, judge_prices
    )


def effort_rows(
    samples: list[SampleRecord], prices: Prices, judge_prices: JudgePrices | None = None
) -> list[GroupRow]:
    """Per reasoning effort, only when a run actually varied it."""
    if len({s.reasoning_effort for s in samples}) <= 1:
        return []
    return summarise(
        samples, lambda s: (s.track, s.model, None, s.reasoning_effort or NO_EFFORT), prices, judge_prices
    )


def outcome_counts(samples: Iterable[SampleRecord]) -> Counter[str]:
    return Counter(str(s.outcome) for s in samples)


def _mean_of(estimate: dict[str, Any] | None) -> float | None:
    return None if not estimate else float(estimate["mean"])


def _row(
    group_key: GroupKey, members: list[SampleRecord], prices: Prices, judge_prices: JudgePrices | None
) -> GroupRow:
    track, model, subject, effort = group_key
    group = summarize_group(members, prices=prices, judge_prices=judge_prices)
    return GroupRow(
        track=track,
        model=model,
        subject=subject,
        reasoning_effort=effort,
        samples=group["samples"],
        tasks=group["tasks"],
        accuracy=Estimate.from_summary(group["accuracy"]),
        outcome_counts=Counter(group["outcomes"]),
        error_samples=group["errors"]["total"],
        judge_errors=group["errors"].get(Outcome.JUDGE_ERROR.value, 0),
        mean_points=_mean_of(group.get("points")),
        mean_eed=_mean_of(group.get("eed")),
        total_tokens=group["tokens"]["total"],
        cost_usd=group["cost_usd"],
        sample_time_s=group["sample_seconds"],
        judge_tokens=group["judge"]["total_tokens"],
        judge_cost_usd=group["judge"]["cost_usd"],
        total_cost_usd=group["total_cost_usd"],
        pass_at_k={int(k): (float(v["mean"]), int(v["tasks"])) for k, v in group["pass_at_k"]["k"].items()},
    )
