"""Which samples a run holds: the model labels, the selected tasks, and every (model, task,
trial) in the order the runner takes them; also the run directory's default name.

`proctor run --dry-run` (agent/run/dry_run.py) plans with these same functions, so what it shows
is what the run does."""

from __future__ import annotations

import collections
import datetime as dt
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proctor.agent.errors import UserError
from proctor.agent.inputs import selection
from proctor.agent.inputs.config import MAX_PLANNED_SAMPLES, ModelConfig, RunConfig


def model_labels(models: list[ModelConfig]) -> list[str]:
    """The name each model's records carry; the effort is added only to tell twins apart."""
    names = [m.name for m in models]
    labels = [
        f"{m.name}@{m.reasoning_effort or 'default'}" if names.count(m.name) > 1 else m.name for m in models
    ]
    if len(set(labels)) != len(labels):
        raise UserError("field 'models': the same model with the same reasoning effort is listed twice")
    return labels


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "run"


def default_run_dir(config: RunConfig, *, now: dt.datetime | None = None) -> Path:
    stamp = (now or dt.datetime.now(dt.UTC)).strftime("%Y%m%dT%H%M%SZ")
    first = config.models[0].name.split("/", 1)[-1]
    more = f"+{len(config.models) - 1}" if len(config.models) > 1 else ""
    return Path("runs") / f"{stamp}-{_slug(config.track)}-{_slug(first)}{more}"


def select_tasks(tasks: list[Any], config: RunConfig) -> list[Any]:
    """Apply the selection (agent/inputs/selection.py: filter, task ids, limit), keeping file order."""
    counts = collections.Counter(str(task.id) for task in tasks)
    duplicated = sorted(task_id for task_id, count in counts.items() if count > 1)
    if duplicated:
        raise UserError(f"{config.tasks}: task ids must be unique; repeated: {', '.join(duplicated[:5])}")
    return selection.select(
        tasks,
        task_filter=config.task_filter,
        task_ids=config.task_ids,
        limit=config.limit_tasks,
        source=str(config.tasks),
    )


@dataclass(frozen=True)
class PlannedSample:
    label: str
    model: ModelConfig
    task: Any
    trial: int

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.label, str(self.task.id), self.trial)


def check_plan_size(config: RunConfig, task_count: int) -> None:
    """One line when models x tasks x trials passes ``MAX_PLANNED_SAMPLES``: the plan is a list
    in memory, and one of 10**400 trials (each field is bounded, their product is not) would
    take the machine's memory, or forever, before the first sample ran."""
    count = len(config.models) * task_count * config.trials
    if count > MAX_PLANNED_SAMPLES:
        raise UserError(
            f"field 'trials': {len(config.models)} model(s) x {task_count:,} task(s) x {config.trials:,} "
            f"trial(s) plan {count:,} samples; one run holds at most {MAX_PLANNED_SAMPLES:,}"
        )


def plan_samples(labels: list[str], config: RunConfig, tasks: list[Any]) -> list[PlannedSample]:
    """Trial-major order, so early results already span tasks and models.

    The count is checked before the list is built (see :func:`check_plan_size`).
    """
    check_plan_size(config, len(tasks))
    return [
        PlannedSample(label, model, task, trial)
        for trial in range(config.trials)
        for task in tasks
        for label, model in zip(labels, config.models, strict=True)
    ]
