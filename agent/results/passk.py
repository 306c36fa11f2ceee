"""pass@k per task and per slice, with the unbiased estimator, and the trials x task grid.

For a task with ``n`` scored trials of which ``c`` succeeded, the unbiased estimate of the chance
that at least one of ``k`` trials drawn without replacement succeeds is
``1 - C(n-c, k) / C(n, k)`` (Chen et al. 2021). It is computed as
``(C(n, k) - C(n-c, k)) / C(n, k)``: Python's integers are exact and ``int / int`` is correctly
rounded, so the result is the exact value rounded once, with no cancellation and no overflow
whatever ``n`` (the usual product form ``1 - prod(1 - k/i)`` rounds at every factor and cancels).

Error outcomes (``proctor.agent.results.records.ERROR_OUTCOMES``) say nothing about the model, so they
are left out of ``n`` exactly as primary accuracy leaves them out: pass@1 of a slice equals its primary
accuracy. A task whose scored trials are fewer than ``k`` has no pass@k estimate; the slice's
pass@k is the mean over the tasks that have one, and says how many those are.

The unit is one (model, task) pair: in a slice holding several models, each model's trials of a
task stay apart, so pass@k there is the mean of the models' per-task values, never a pool of
trials from different models.
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from proctor.agent.results.records import ERROR_OUTCOMES, SampleRecord
from proctor.agent.results.task_stats import mean, standard_error


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for ``c`` successes among ``n`` trials; needs ``0 <= c <= n`` and ``1 <= k <= n``."""
    if not 0 <= c <= n:
        raise ValueError(f"successes {c} outside 0..{n}")
    if not 1 <= k <= n:
        raise ValueError(f"k={k} outside 1..{n}")
    if n - c < k:
        return 1.0  # every k-subset holds a success
    total = math.comb(n, k)
    # The complement's numerator in integers, then one correctly rounded division: subtracting
    # a float ratio from 1 would cancel (pass@1 of 1 in 10,000 came out as 9.99999999999889e-05).
    return (total - math.comb(n - c, k)) / total


@functools.lru_cache(maxsize=4096)
def pass_at_every_k(n: int, c: int) -> tuple[float, ...]:
    """``pass_at_k(n, c, k)`` for k = 1..n, the same exact values, in O(n) integer steps.

    C(n, k) and C(n-c, k) are carried from one k to the next (``C(m, k) = C(m, k-1)(m-k+1)/k``,
    exact in integers), so a task with thousands of trials costs milliseconds, not the seconds
    that ``math.comb`` from scratch for every k would.
    """
    if not 0 <= c <= n:
        raise ValueError(f"successes {c} outside 0..{n}")
    values = []
    total, failing = 1, 1  # C(n, 0), C(n - c, 0)
    for k in range(1, n + 1):
        total = total * (n - k + 1) // k
        failing = failing * (n - c - k + 1) // k if k <= n - c else 0
        values.append((total - failing) / total)
    return tuple(values)


@dataclass
class TaskTrials:
    """One model's trials of one task: the row of the trials x task grid."""

    model: str
    task_id: str
    subject: str | None
    outcomes: dict[int, str] = field(default_factory=dict)  # trial -> outcome
    successes: dict[int, bool] = field(default_factory=dict)  # scored trials only

    @property
    def n(self) -> int:
        return len(self.successes)

    @property
    def c(self) -> int:
        return sum(self.successes.values())

    @property
    def errors(self) -> int:
        return len(self.outcomes) - self.n

    def pass_at(self, k: int) -> float | None:
        return pass_at_every_k(self.n, self.c)[k - 1] if 1 <= k <= self.n else None

    def to_dict(self, k_max: int) -> dict[str, Any]:
        return {
            "model": self.model,
            "task_id": self.task_id,
            "subject": self.subject,
            "trials": {str(t): self.outcomes[t] for t in sorted(self.outcomes)},
            "scored": self.n,
            "correct": self.c,
            "errors": self.errors,
            "pass_at_k": {str(k): self.pass_at(k) for k in range(1, k_max + 1)},
        }


def task_grid(records: Sequence[SampleRecord]) -> list[TaskTrials]:
    """Rows per (model, task), in model then task order; trials keyed by their number."""
    rows: dict[tuple[str, str], TaskTrials] = {}
    for record in records:
        row = rows.setdefault(
            (record.model, record.task_id), TaskTrials(record.model, record.task_id, record.subject)
        )
        row.outcomes[record.trial] = record.outcome.value
        if record.outcome not in ERROR_OUTCOMES:
            row.successes[record.trial] = bool(record.success)
    return [rows[key] for key in sorted(rows)]


# Per-task tables show every k up to this many trials; beyond, k = 1..8, every fifth k and the
# last, so 100 trials do not make 100 columns per task (summary.json keeps every k).
ALL_KS_UP_TO = 10


def shown_ks(k_max: int) -> list[int]:
    """The k columns a per-task table shows: all of them up to ALL_KS_UP_TO, else a selection."""
    if k_max <= ALL_KS_UP_TO:
        return list(range(1, k_max + 1))
    return [k for k in range(1, k_max + 1) if k <= 8 or k % 5 == 0 or k == k_max]


def max_k(rows: Sequence[TaskTrials]) -> int:
    return max((row.n for row in rows), default=0)


def pass_at_k_summary(rows: Sequence[TaskTrials]) -> dict[str, Any]:
    """Per k in 1..(most scored trials of any task): mean over the tasks with at least k, its SE."""
    values: dict[str, Any] = {}
    for k in range(1, max_k(rows) + 1):
        per_task = [p for p in (row.pass_at(k) for row in rows) if p is not None]
        values[str(k)] = {"mean": mean(per_task), "se": standard_error(per_task), "tasks": len(per_task)}
    return {"unit": "model x task", "errors": "excluded from n", "k": values}


def grid_by_model(records: Sequence[SampleRecord]) -> dict[str, dict[str, Any]]:
    """summary.json's ``tasks`` block: for each model its pass@k and its trials x task grid."""
    by_model: dict[str, list[SampleRecord]] = defaultdict(list)
    for record in records:
        by_model[record.model].append(record)
    out: dict[str, dict[str, Any]] = {}
    for model in sorted(by_model):
        rows = task_grid(by_model[model])
        k_max = max_k(rows)
        trials = sorted({t for row in rows for t in row.outcomes})
        out[model] = {
            "trials": trials,
            "pass_at_k": pass_at_k_summary(rows),
            "grid": [row.to_dict(k_max) for row in rows],
        }
    return out
