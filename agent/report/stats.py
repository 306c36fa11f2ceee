"""The one place the report gets its uncertainty math from: ``proctor.agent.results.task_stats``.

The run summary (``proctor.agent.results.summary``) and this report share those functions, so the page,
``summary.json`` and ``proctor compare`` can never disagree about a mean or an interval.
This module only adapts them to one shape with NaN for "undefined" (one task has no SE).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from proctor.agent.results import task_stats as shared


@dataclass(frozen=True)
class Estimate:
    """A mean with its standard error and a 95% percentile bootstrap interval (NaN: undefined)."""

    mean: float
    se: float
    ci_low: float
    ci_high: float
    n: int
    tasks: int = 0

    @classmethod
    def empty(cls) -> Estimate:
        return cls(math.nan, math.nan, math.nan, math.nan, 0, 0)

    @classmethod
    def from_summary(cls, data: dict[str, Any] | None) -> Estimate:
        """From an estimate dict as ``proctor.agent.results.summary`` writes it into summary.json."""
        if not data:
            return cls.empty()
        se = data.get("se")
        return cls(
            mean=float(data["mean"]),
            se=math.nan if se is None else float(se),
            ci_low=float(data["ci95_low"]),
            ci_high=float(data["ci95_high"]),
            n=int(data.get("n_samples", 0)),
            tasks=int(data.get("n_tasks", 0)),
        )


def mean(values: Sequence[float]) -> float:
    return shared.mean(values) if values else math.nan


def standard_error(values: Sequence[float]) -> float:
    se = shared.standard_error(values)
    return math.nan if se is None else se


def bootstrap_ci(values: Sequence[float]) -> tuple[float, float]:
    if not values:
        return (math.nan, math.nan)
    return shared.bootstrap_ci(values)


def estimate_by_cluster(values_by_cluster: dict[str, list[float]]) -> Estimate:
    """Mean of per-task means, task-level SE and a bootstrap CI that resamples tasks."""
    estimate = shared.clustered_estimate(values_by_cluster)
    if estimate is None:
        return Estimate.empty()
    return Estimate.from_summary(estimate.to_dict())


def paired_difference(differences: Sequence[float]) -> Estimate:
    """Mean of per-task paired differences, its SE over tasks and a paired bootstrap CI.

    Resampling the per-task differences is resampling tasks with both arms kept together.
    """
    if not differences:
        return Estimate.empty()
    low, high = bootstrap_ci(differences)
    return Estimate(
        mean(differences), standard_error(differences), low, high, len(differences), len(differences)
    )
