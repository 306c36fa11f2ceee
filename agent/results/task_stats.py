"""Small, dependency-free statistics for run summaries: task-clustered means, SEs, bootstrap CIs.

Samples of one task are not independent (same problem, several trials), so the unit of
uncertainty is the task: the estimate is the mean of per-task means, its standard error
is the spread of those task means, and the bootstrap resamples whole tasks.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 0


@dataclass(frozen=True)
class Estimate:
    mean: float
    # Task-clustered standard error: sd(task means, ddof=1) / sqrt(tasks). None for one task.
    se: float | None
    # Standard error treating every sample as independent: sd(samples, ddof=1) / sqrt(n).
    se_samples: float | None
    ci95_low: float
    ci95_high: float
    n_samples: int
    n_tasks: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def total(values: Iterable[float]) -> float:
    """``math.fsum``, or the plain sum where fsum refuses: it raises on an overflow (two values
    near 1e308) and on inf + -inf, which an edited run directory may hold (records keep NaN and
    infinities, docs/runs.md); the statistic is then inf or nan, as the data is, never a crash."""
    items = list(values)
    try:
        return math.fsum(items)
    except (OverflowError, ValueError):
        return sum(items, 0.0)


def mean(values: Sequence[float]) -> float:
    return total(values) / len(values)


def standard_error(values: Sequence[float]) -> float | None:
    """sd(values, ddof=1) / sqrt(n); undefined (None) for fewer than two values."""
    n = len(values)
    if n < 2:
        return None
    centre = mean(values)
    # d * d, not d ** 2: float power raises on overflow where a product is inf.
    variance = total((v - centre) * (v - centre) for v in values) / (n - 1)
    return math.sqrt(variance / n)


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Linear interpolation between closest ranks (numpy's default 'linear' method)."""
    position = fraction * (len(sorted_values) - 1)
    lower = math.floor(position)
    upper = min(lower + 1, len(sorted_values) - 1)
    weight = position - lower
    return sorted_values[lower] * (1 - weight) + sorted_values[upper] * weight


def bootstrap_engine() -> str:
    """numpy when importable (fast); the pure-Python path gives different draws, same method."""
    try:
        import numpy  # noqa: F401
    except ImportError:
        return "python"
    return "numpy"


@functools.lru_cache(maxsize=4096)
def _bootstrap_cached(
    task_means: tuple[float, ...], resamples: int, seed: int, level: float, engine: str
) -> tuple[float, float]:
    count = len(task_means)
    tail = (1 - level) / 2
    if engine == "numpy":
        import numpy as np

        values = np.asarray(task_means, dtype=float)
        rng = np.random.default_rng(seed)
        draws = rng.integers(0, count, size=(resamples, count))
        # Means of inf or 1e308 task means (an edited run directory) are inf or nan, quietly.
        with np.errstate(over="ignore", invalid="ignore"):
            stats = sorted(float(v) for v in values[draws].mean(axis=1))
    else:
        rng_py = random.Random(seed)
        stats = sorted(total(rng_py.choices(task_means, k=count)) / count for _ in range(resamples))
    return percentile(stats, tail), percentile(stats, 1 - tail)


def bootstrap_ci(
    task_means: Sequence[float],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile CI of the mean of task means, resampling tasks with replacement.

    A fresh generator seeded with ``seed`` per call makes every group's interval
    reproducible and independent of the order in which groups are summarised. Results
    are cached: slices that hold the same tasks (one model = overall) cost nothing extra.
    """
    means = tuple(float(v) for v in task_means)
    return _bootstrap_cached(means, resamples, seed, level, bootstrap_engine())


def clustered_estimate(
    values_by_task: dict[str, list[float]],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> Estimate | None:
    """Mean of per-task means with its task-level SE, per-sample SE and bootstrap CI."""
    # In task-id order, each task's values sorted: the bootstrap draws tasks by position, so the
    # order samples finished in (which concurrency, a crash and --resume all change) must not
    # change the interval. The same records give the same numbers, to the last bit.
    ordered = [sorted(values_by_task[task]) for task in sorted(values_by_task)]
    task_means = [mean(values) for values in ordered if values]
    if not task_means:
        return None
    samples = [v for values in ordered for v in values]
    low, high = bootstrap_ci(task_means, resamples=resamples, seed=seed)
    return Estimate(
        mean=mean(task_means),
        se=standard_error(task_means),
        se_samples=standard_error(samples),
        ci95_low=low,
        ci95_high=high,
        n_samples=len(samples),
        n_tasks=len(task_means),
    )
