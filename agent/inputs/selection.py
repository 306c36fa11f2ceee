"""Which tasks a run evaluates: ``task_filter``, ``task_ids`` and ``limit_tasks``.

Applied by the runner right after the task file is loaded, before any model, judge or sandbox
is opened, in this order and always in file order:

1. ``task_filter`` (``--filter KEY=VALUE``): every key is a dotted path into the task as the
   track loaded it (``subject``, ``answer_type``, ``metadata.difficulty``); a path whose first
   part is not a field of the task is read inside ``metadata`` (``quickstart: true`` means
   ``metadata.quickstart``). A task is kept when every path holds the value.
2. ``task_ids`` (``--task-id``): glob patterns (``fnmatch``, case-sensitive) over task ids; a
   task is kept when any pattern matches it.
3. ``limit_tasks`` (``--limit``): ``N`` keeps the first N tasks left, ``A-B`` the A-th to the
   B-th, counted from 1 and inclusive (Inspect AI's ``--limit 10-20``).

A path no task has, a pattern no task id matches, or a selection that leaves nothing is a
one-line error: a typo must not silently run the wrong tasks or none.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from collections.abc import Iterable
from fnmatch import fnmatchcase
from typing import Any

from pydantic import BaseModel

from proctor.agent.errors import UserError

_RANGE = re.compile(r"^\s*([0-9]+)\s*-\s*([0-9]+)\s*$")
_COUNT = re.compile(r"^\s*([0-9]+)\s*$")
# A run.json keeps at most this many selected ids; the samples themselves name every task.
MAX_RECORDED_IDS = 1_000
_MISSING = object()
LIMIT_HELP = "expected N or A-B (1-based, inclusive), e.g. 10 or 11-20"


def normalise_limit(value: Any) -> int | str | None:
    """``limit_tasks`` as stored: a count ``N`` (int) or a range ``"A-B"``; ValueError otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"{LIMIT_HELP}; got {value!r}")
    if isinstance(value, int):
        if value < 1:
            raise ValueError(f"{LIMIT_HELP}; got {value} (the count must be at least 1)")
        return value
    if (count := _COUNT.match(value)) is not None:
        return normalise_limit(int(count.group(1)))
    match = _RANGE.match(value)
    if match is None:
        raise ValueError(f"{LIMIT_HELP}; got {value!r}")
    start, end = int(match.group(1)), int(match.group(2))
    if start < 1 or end < start:
        raise ValueError(f"{LIMIT_HELP}; got {value!r} (need 1 <= A <= B)")
    return f"{start}-{end}"


def limit_slice(limit: int | str) -> slice:
    """The Python slice of the tasks left that ``limit`` keeps."""
    if isinstance(limit, int):
        return slice(0, limit)
    start, end = (int(part) for part in limit.split("-"))
    return slice(start - 1, end)


def task_fields(task: Any) -> dict[str, Any]:
    """A task as the plain mapping the filter paths walk."""
    if isinstance(task, BaseModel):
        return task.model_dump(mode="python")
    if dataclasses.is_dataclass(task) and not isinstance(task, type):
        return dataclasses.asdict(task)
    if isinstance(task, dict):
        return dict(task)
    return dict(vars(task))


def _walk(fields: dict[str, Any], path: list[str]) -> Any:
    value: Any = fields
    for part in path:
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


def field_value(fields: dict[str, Any], key: str) -> Any:
    """The value ``key`` names in ``fields``, or ``_MISSING``; bare metadata keys are allowed."""
    path = key.split(".")
    if path[0] in fields:
        return _walk(fields, path)
    metadata = fields.get("metadata")
    return _walk(metadata, path) if isinstance(metadata, dict) else _MISSING


def _spelling(value: Any) -> str | None:
    """How a non-text scalar is written on a command line (JSON/YAML spelling)."""
    if value is None or isinstance(value, bool | int | float):
        return json.dumps(value)
    return None


def value_matches(actual: Any, expected: Any) -> bool:
    """Typed equality, so ``true`` never matches ``1``; text from a command line also matches a
    number, boolean or null by its spelling (``--filter metadata.level=3`` finds ``3``)."""
    if isinstance(expected, str):
        if isinstance(actual, str):
            return actual == expected
        return _spelling(actual) == expected
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(expected, bool) and isinstance(actual, bool) and expected == actual
    if isinstance(expected, int | float) and isinstance(actual, int | float):
        return bool(actual == expected)
    return type(actual) is type(expected) and bool(actual == expected)


def _known_fields(records: Iterable[dict[str, Any]]) -> str:
    fields: set[str] = set()
    metadata: set[str] = set()
    for record in records:
        fields.update(record)
        if isinstance(record.get("metadata"), dict):
            metadata.update(f"metadata.{key}" for key in record["metadata"])
    listed = sorted(fields) + sorted(metadata)[:20]
    return ", ".join(listed)


def _apply_filter(tasks: list[Any], task_filter: dict[str, Any], source: str) -> list[Any]:
    records = [task_fields(task) for task in tasks]
    for key in task_filter:
        if not key or any(not part for part in key.split(".")):
            raise UserError(
                f"{source}: field 'task_filter': {key!r} is not a field path (e.g. metadata.level)"
            )
        if all(field_value(record, key) is _MISSING for record in records):
            raise UserError(
                f"{source}: field 'task_filter': no task has a field {key!r} "
                f"(fields: {_known_fields(records)})"
            )
    kept = [
        task
        for task, record in zip(tasks, records, strict=True)
        if all(
            (actual := field_value(record, key)) is not _MISSING and value_matches(actual, expected)
            for key, expected in task_filter.items()
        )
    ]
    if not kept:
        raise UserError(f"{source}: field 'task_filter': {_why_nothing_matched(records, task_filter)}")
    return kept


# A "no match" line lists at most this many values (the most common first), each cut to this length.
MAX_LISTED_VALUES = 20
MAX_SHOWN_VALUE = 40


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= MAX_SHOWN_VALUE else text[:MAX_SHOWN_VALUE] + "…"


def _why_nothing_matched(records: list[dict[str, Any]], task_filter: dict[str, Any]) -> str:
    """The first key no task matches on its own, with the values the tasks do hold; else that
    the keys match apart but never together."""
    for key, expected in task_filter.items():
        values = [field_value(record, key) for record in records]
        present = [value for value in values if value is not _MISSING]
        if any(value_matches(value, expected) for value in present):
            continue
        counts = Counter(_shown(value) for value in present)
        listed = ", ".join(f"{value} ({n})" for value, n in counts.most_common(MAX_LISTED_VALUES))
        more = f", and {len(counts) - MAX_LISTED_VALUES} more" if len(counts) > MAX_LISTED_VALUES else ""
        return f"no task has {key}={_shown(expected)}; the tasks hold {listed}{more}"
    return f"each of {', '.join(task_filter)} matches some task, but no task matches them all"


def _apply_ids(tasks: list[Any], patterns: list[str], source: str) -> list[Any]:
    ids = [str(task.id) for task in tasks]
    for pattern in patterns:
        if not any(fnmatchcase(task_id, pattern) for task_id in ids):
            raise UserError(f"{source}: field 'task_ids': no task id matches {pattern!r}")
    return [
        task
        for task, task_id in zip(tasks, ids, strict=True)
        if any(fnmatchcase(task_id, p) for p in patterns)
    ]


def describe_selection(task_filter: dict[str, Any], task_ids: list[str], limit: int | str | None) -> str:
    parts = [f"filter {key}={value!r}" for key, value in task_filter.items()]
    if task_ids:
        parts.append("task ids " + ", ".join(repr(p) for p in task_ids))
    if limit is not None:
        parts.append(f"limit {limit}")
    return "; ".join(parts) or "all tasks"


def select(
    tasks: list[Any],
    *,
    task_filter: dict[str, Any],
    task_ids: list[str],
    limit: int | str | None,
    source: str,
) -> list[Any]:
    """The tasks the selection keeps, in file order; one-line UserError when it keeps none."""
    selected = list(tasks)
    if task_filter:
        selected = _apply_filter(selected, task_filter, source)
    if task_ids:
        selected = _apply_ids(selected, task_ids, source)
    left = len(selected)
    if limit is not None:
        selected = selected[limit_slice(limit)]
    if not selected:
        what = describe_selection(task_filter, task_ids, limit)
        beyond = f" ({left} task(s) before the limit)" if limit is not None else ""
        raise UserError(f"{source}: no task left after the selection: {what}{beyond}")
    return selected


def selection_record(
    tasks_in_file: int,
    selected: list[Any],
    *,
    task_filter: dict[str, Any],
    task_ids: list[str],
    limit: int | str | None,
) -> dict[str, Any]:
    """What run.json keeps about the selection."""
    ids = [str(task.id) for task in selected]
    return {
        "task_filter": task_filter,
        "task_ids": task_ids,
        "limit": limit,
        "tasks_in_file": tasks_in_file,
        "selected_tasks": len(selected),
        "selected_ids": ids[:MAX_RECORDED_IDS],
        "selected_ids_truncated": len(ids) > MAX_RECORDED_IDS,
    }
