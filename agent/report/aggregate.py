"""Summary rows for the report: accuracy with uncertainty, outcomes, tokens, cost, time.

Accuracy is taken over *scored* samples only. Samples whose outcome says nothing about the
model (judge, model or verifier errors) are counted in their own column, never as wrong.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from agent.records import ERROR_OUTCOMES, Outcome, SampleRecord
from agent.report.loader import ModelPrice
from agent.report.stats import Estimate, estimate_by_cluster, mean

# Display order for outcomes: good, bad, then the error kinds.
OUTCOME_ORDER: tuple[Outcome, ...] = (
    Outcome.CORRECT,
    Outcome.INCORRECT,
    Outcome.ANSWER_ERROR,
    Outcome.ANSWER_TIMEOUT,
    Outcome.INVALID_SUBMISSION,
    Outcome.NO_SUBMISSION,
    Outcome.VERIFY_ERROR,
    Outcome.JUDGE_ERROR,
    Outcome.MODEL_ERROR,
    Outcome.SCORER_TIMEOUT,
)


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
    key: Callable[[SampleRecord], tuple[str, str, str | None, str | None]],
    prices: dict[str, ModelPrice],
) -> list[GroupRow]:
    groups: dict[tuple[str, str, str | None, str | None], list[SampleRecord]] = defaultdict(list)
    for sample in samples:
        groups[key(sample)].append(sample)
    return [
        _row(group_key, members, prices)
        for group_key, members in sorted(groups.items(), key=lambda item: tuple(str(p) for p in item[0]))
    ]


def overall_rows(samples: list[SampleRecord], prices: dict[str, ModelPrice]) -> list[GroupRow]:
    return summarise(samples, lambda s: (s.track, s.model, None, None), prices)


def subject_rows(samples: list[SampleRecord], prices: dict[str, ModelPrice]) -> list[GroupRow]:
    return summarise(samples, lambda s: (s.track, s.model, s.subject or "(none)", None), prices)


def effort_rows(samples: list[SampleRecord], prices: dict[str, ModelPrice]) -> list[GroupRow]:
    """Per reasoning effort, only when a run actually varied it."""
    if len({s.reasoning_effort for s in samples}) <= 1:
        return []
    return summarise(samples, lambda s: (s.track, s.model, None, s.reasoning_effort or "default"), prices)


def outcome_counts(samples: Iterable[SampleRecord]) -> Counter[str]:
    return Counter(str(s.outcome) for s in samples)


def _row(
    group_key: tuple[str, str, str | None, str | None],
    members: list[SampleRecord],
    prices: dict[str, ModelPrice],
) -> GroupRow:
    track, model, subject, effort = group_key
    by_task: dict[str, list[float]] = defaultdict(list)
    for sample in members:
        if is_scored(sample):
            by_task[sample.task_id].append(1.0 if sample.success else 0.0)
    points = [s.score for s in members if is_scored(s)]
    # Points only mean something beyond 0/1 on graded tracks (Research: 0..10).
    graded = any(p not in (0.0, 1.0) for p in points) or track.endswith("research")
    eed_scores = [s.eed.score for s in members if s.eed is not None]
    price = prices.get(model)
    cost = None
    if price is not None:
        cost = sum(price.cost(s.input_tokens, s.output_tokens) for s in members)
    return GroupRow(
        track=track,
        model=model,
        subject=subject,
        reasoning_effort=effort,
        samples=len(members),
        tasks=len({s.task_id for s in members}),
        accuracy=estimate_by_cluster(dict(by_task)),
        outcome_counts=outcome_counts(members),
        error_samples=sum(1 for s in members if not is_scored(s)),
        # The outcome is authoritative: a parse error the judge's retry fixed is not an error.
        judge_errors=sum(1 for s in members if s.outcome == Outcome.JUDGE_ERROR),
        mean_points=mean(points) if graded and points else None,
        mean_eed=mean(eed_scores) if eed_scores else None,
        total_tokens=sum(s.total_tokens for s in members),
        cost_usd=cost,
        sample_time_s=sum(s.duration_s for s in members),
    )
