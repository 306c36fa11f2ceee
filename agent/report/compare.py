"""Paired comparison of models or runs over the tasks they share.

An *arm* is one model within one run. The first arm is the baseline. For every other arm,
each task both arms scored gives a paired difference (arm's mean success minus the
baseline's); the mean of those differences comes with its SE over tasks and a paired
bootstrap CI (tasks resampled, both arms together), overall and per subject.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from proctor.agent.errors import UserError
from proctor.agent.report.aggregate import is_scored
from proctor.agent.report.loader import RunData
from proctor.agent.report.stats import Estimate, estimate_by_cluster, paired_difference
from proctor.agent.results.records import SampleRecord


@dataclass
class Arm:
    label: str
    run_id: str
    model: str
    samples: list[SampleRecord]
    # task id -> mean success over its scored trials
    task_means: dict[str, float] = field(default_factory=dict)
    task_subjects: dict[str, str] = field(default_factory=dict)
    accuracy: Estimate | None = None

    def __post_init__(self) -> None:
        by_task: dict[str, list[float]] = defaultdict(list)
        for sample in self.samples:
            self.task_subjects.setdefault(sample.task_id, sample.subject or "(none)")
            if is_scored(sample):
                by_task[sample.task_id].append(1.0 if sample.success else 0.0)
        self.task_means = {task: sum(v) / len(v) for task, v in by_task.items()}
        self.accuracy = estimate_by_cluster(dict(by_task))

    @property
    def error_outcomes(self) -> dict[str, int]:
        """Samples left out of the accuracy because they ended in an error, by outcome: an arm
        whose model failed half its samples must not read like one that answered them all."""
        counts = Counter(sample.outcome.value for sample in self.samples if not is_scored(sample))
        return dict(sorted(counts.items()))


@dataclass(frozen=True)
class PairedComparison:
    arm: str
    baseline: str
    subject: str | None  # None: all tasks in common
    difference: Estimate


@dataclass
class Comparison:
    arms: list[Arm]
    paired: list[PairedComparison]
    tasks: list[str]  # every task any arm scored, sorted

    @property
    def baseline(self) -> Arm:
        return self.arms[0]

    def subjects(self) -> list[str]:
        return sorted({subject for arm in self.arms for subject in arm.task_subjects.values()})

    def subject_accuracy(self, arm: Arm, subject: str) -> Estimate:
        """One arm's accuracy over its own tasks of one subject (not only tasks in common)."""
        values: dict[str, list[float]] = defaultdict(list)
        for sample in arm.samples:
            if (sample.subject or "(none)") == subject and is_scored(sample):
                values[sample.task_id].append(1.0 if sample.success else 0.0)
        return estimate_by_cluster(dict(values))

    def subject_of(self, task: str) -> str:
        for arm in self.arms:
            if task in arm.task_subjects:
                return arm.task_subjects[task]
        return "(none)"


def build_arms(runs: list[RunData]) -> list[Arm]:
    groups: list[tuple[RunData, str, list[SampleRecord]]] = []
    for run in runs:
        by_model: dict[str, list[SampleRecord]] = defaultdict(list)
        for sample in run.samples:
            by_model[sample.model].append(sample)
        groups += [(run, model, members) for model, members in by_model.items()]
    models = [model for _, model, _ in groups]
    # Label by model when that is unambiguous, else by run and model.
    unique_models = len(set(models)) == len(models)
    run_labels = _run_labels(runs)
    arms = []
    for run, model, members in groups:
        label = model if unique_models else f"{run_labels[id(run)]} · {model}"
        arms.append(Arm(label=label, run_id=run.run_id, model=model, samples=members))
    return arms


def _run_labels(runs: list[RunData]) -> dict[int, str]:
    ids = [run.run_id for run in runs]
    if len(set(ids)) == len(ids):
        return {id(run): run.run_id for run in runs}
    return {id(run): str(run.run_dir) for run in runs}


def compare_arms(arms: list[Arm]) -> Comparison:
    if len(arms) < 2:
        raise UserError("compare needs at least two models or runs (got one); pass more run directories")
    baseline = arms[0]
    paired: list[PairedComparison] = []
    for arm in arms[1:]:
        common = sorted(set(baseline.task_means) & set(arm.task_means))
        differences = {task: arm.task_means[task] - baseline.task_means[task] for task in common}
        paired.append(
            PairedComparison(arm.label, baseline.label, None, paired_difference(list(differences.values())))
        )
        by_subject: dict[str, list[float]] = defaultdict(list)
        for task in common:
            by_subject[baseline.task_subjects.get(task, "(none)")].append(differences[task])
        paired += [
            PairedComparison(arm.label, baseline.label, subject, paired_difference(values))
            for subject, values in sorted(by_subject.items())
        ]
    tasks = sorted({task for arm in arms for task in arm.task_means})
    return Comparison(arms=arms, paired=paired, tasks=tasks)


def compare_runs(runs: list[RunData]) -> Comparison:
    return compare_arms(build_arms(runs))


def fmt_pct(value: float | None) -> str:
    return "—" if value is None or math.isnan(value) else f"{value:.1%}"


def fmt_signed(value: float) -> str:
    return "—" if math.isnan(value) else f"{value * 100:+.1f} pp"


def fmt_ci(estimate: Estimate) -> str:
    if math.isnan(estimate.ci_low):
        return "—"
    return f"[{estimate.ci_low * 100:+.1f}, {estimate.ci_high * 100:+.1f}]"


def _estimate_json(estimate: Estimate | None) -> dict[str, float | int | None] | None:
    if estimate is None:
        return None
    # NaN (undefined: one task, no samples) is null: JSON has no NaN.
    return {
        name: (None if isinstance(value, float) and not math.isfinite(value) else value)
        for name, value in vars(estimate).items()
    }


def comparison_json(comparison: Comparison) -> dict[str, object]:
    """Everything `proctor compare` prints, as data (`--json`): arms with their accuracy, per
    subject and per task, and the paired differences; names exactly as the runs hold them."""
    subjects = comparison.subjects()
    return {
        "baseline": comparison.baseline.label,
        "arms": [
            {
                "label": arm.label,
                "run_id": arm.run_id,
                "model": arm.model,
                "accuracy": _estimate_json(arm.accuracy),
                "error_samples": arm.error_outcomes,
                "subjects": {s: _estimate_json(comparison.subject_accuracy(arm, s)) for s in subjects},
                "task_means": dict(sorted(arm.task_means.items())),
            }
            for arm in comparison.arms
        ],
        "paired": [
            {
                "arm": paired.arm,
                "baseline": paired.baseline,
                "subject": paired.subject,
                "difference": _estimate_json(paired.difference),
            }
            for paired in comparison.paired
        ],
        "tasks": [{"task_id": task, "subject": comparison.subject_of(task)} for task in comparison.tasks],
    }
