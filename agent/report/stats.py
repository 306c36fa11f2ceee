"""The one place the report gets its uncertainty math from.

Aggregation belongs to ``agent.summary`` (written with the runner). Until its pure
functions are importable, the small fallbacks below stand in, so swapping is a one-file
change and the report and ``proctor compare`` never disagree with the run summary.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

BOOTSTRAP_RESAMPLES = 2000
CI_LEVEL = 0.95
# A fixed seed keeps a report byte-identical when it is rebuilt from the same run.
BOOTSTRAP_SEED = 20261130


@dataclass(frozen=True)
class Estimate:
    """A mean with its standard error and a percentile bootstrap interval."""

    mean: float
    se: float
    ci_low: float
    ci_high: float
    n: int


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def standard_error(values: Sequence[float]) -> float:
    """Sample standard deviation over sqrt(n); 0 for a single value, NaN for none."""
    n = len(values)
    if n == 0:
        return math.nan
    if n == 1:
        return 0.0
    m = mean(values)
    variance = sum((v - m) ** 2 for v in values) / (n - 1)
    return math.sqrt(variance / n)


def bootstrap_ci(
    values: Sequence[float],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    level: float = CI_LEVEL,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values`` (resampled with replacement)."""
    n = len(values)
    if n == 0:
        return (math.nan, math.nan)
    if n == 1:
        return (values[0], values[0])
    rng = random.Random(seed)
    data = list(values)
    means = sorted(sum(rng.choices(data, k=n)) / n for _ in range(resamples))
    tail = (1.0 - level) / 2.0
    low_index = math.floor(tail * (resamples - 1))
    high_index = math.ceil((1.0 - tail) * (resamples - 1))
    return (means[low_index], means[high_index])


def estimate_by_cluster(values_by_cluster: dict[str, list[float]]) -> Estimate:
    """Mean over all values; SE and bootstrap CI over per-cluster (per-task) means.

    Trials of one task are correlated, so the uncertainty is taken over tasks, not samples.
    With one trial per task this is the ordinary per-sample estimate.
    """
    all_values = [v for values in values_by_cluster.values() for v in values]
    cluster_means = [mean(values) for values in values_by_cluster.values() if values]
    if not all_values:
        return Estimate(math.nan, math.nan, math.nan, math.nan, 0)
    low, high = bootstrap_ci(cluster_means)
    return Estimate(mean(all_values), standard_error(cluster_means), low, high, len(all_values))


def paired_difference(differences: Sequence[float]) -> Estimate:
    """Mean of per-task paired differences, its SE over tasks and a paired bootstrap CI."""
    if not differences:
        return Estimate(math.nan, math.nan, math.nan, math.nan, 0)
    low, high = bootstrap_ci(differences)
    return Estimate(mean(differences), standard_error(differences), low, high, len(differences))
