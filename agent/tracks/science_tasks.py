"""Task files for the judge-based and PHYBench tracks.

Two layouts are accepted, row by row, in one file:

* the official FrontierScience gold set (``problem``, ``answer``, ``subject``,
  ``task_group_id``); in the research split ``answer`` is the rubric. Fields beyond these are
  ignored, so a later release with extra columns still loads;
* our own format (``id``, ``question``, ``answer`` or ``rubric``, optional ``subject`` and
  ``metadata``); unknown fields are errors, because there a typo would silently drop data.

Gold rows have no ``id``; theirs is the ``task_group_id``. The research split holds one item
twice under the same ``task_group_id``: its first row keeps the plain id and later rows get
``#2``, ``#3``..., so every row loads, ids are unique, and ids do not depend on row order
except among the duplicates themselves.

Files may be JSONL, or a JSON or YAML list. Errors read ``file:line: field 'x': message``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from agent.errors import UserError

TaskKind = Literal["olympiad", "research", "phybench"]

GOLD_FIELDS = frozenset({"problem", "answer", "subject", "task_group_id"})
OWN_REQUIRED = frozenset({"id", "question"})
OWN_OPTIONAL = frozenset({"answer", "rubric", "subject", "metadata"})


class TaskFileError(UserError):
    """A task file is unreadable or a row breaks the layout; the message names file, line, field."""


@dataclass(frozen=True)
class ScienceTask:
    id: str
    question: str
    # Olympiad / PHYBench: the reference answer. Research: the grading rubric.
    answer: str
    subject: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    source: str = ""  # "file:line", for messages and the record

    @property
    def rubric(self) -> str:
        return self.answer


def load_science_tasks(path: Path, kind: TaskKind) -> list[ScienceTask]:
    rows = list(_read_rows(path))
    if not rows:
        raise TaskFileError(f"{path}: no tasks in file")
    tasks: list[ScienceTask] = []
    seen_ids: dict[str, int] = {}
    gold_occurrences: dict[str, int] = {}
    for line, row in rows:
        where = f"{path}:{line}"
        if not isinstance(row, dict):
            raise TaskFileError(f"{where}: expected an object, got {type(row).__name__}")
        if "id" in row or "question" in row:
            task = _own_task(row, kind, where)
        elif "problem" in row:
            task = _gold_task(row, where, gold_occurrences)
        else:
            raise TaskFileError(
                f"{where}: field 'question': missing (own format needs 'id' and 'question'; "
                "the gold layout needs 'problem', 'answer', 'subject', 'task_group_id')"
            )
        if task.id in seen_ids:
            raise TaskFileError(
                f"{where}: field 'id': duplicate id {task.id!r} (first on line {seen_ids[task.id]})"
            )
        seen_ids[task.id] = line
        tasks.append(task)
    return tasks


def _read_rows(path: Path) -> Iterator[tuple[int, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TaskFileError(f"{path}: cannot read task file: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise TaskFileError(f"{path}: not UTF-8 text: {exc.reason}") from exc
    suffix = path.suffix.lower()
    if suffix in {".yaml", ".yml", ".json"}:
        yield from _read_list(path, text, suffix)
        return
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as exc:
            raise TaskFileError(f"{path}:{number}: invalid JSON: {exc.msg} (column {exc.colno})") from exc


def _read_list(path: Path, text: str, suffix: str) -> Iterator[tuple[int, Any]]:
    try:
        data = json.loads(text) if suffix == ".json" else yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise TaskFileError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg}") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise TaskFileError(f"{path}{line}: invalid YAML: {exc}") from exc
    if not isinstance(data, list):
        raise TaskFileError(f"{path}: expected a list of tasks, got {type(data).__name__}")
    # A JSON/YAML list has no line per entry; report the entry's 1-based position instead.
    yield from enumerate(data, start=1)


def _text_field(row: dict[str, Any], name: str, where: str, *, required: bool = True) -> str | None:
    value = row.get(name)
    if value is None:
        if required:
            raise TaskFileError(f"{where}: field '{name}': missing")
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise TaskFileError(f"{where}: field '{name}': expected text, got {type(value).__name__}")
    text = str(value)
    if required and not text.strip():
        raise TaskFileError(f"{where}: field '{name}': empty")
    return text


def _gold_task(row: dict[str, Any], where: str, occurrences: dict[str, int]) -> ScienceTask:
    for name in sorted(GOLD_FIELDS):
        _text_field(row, name, where)
    group = str(row["task_group_id"]).strip()
    occurrences[group] = occurrences.get(group, 0) + 1
    count = occurrences[group]
    task_id = group if count == 1 else f"{group}#{count}"
    return ScienceTask(
        id=task_id,
        question=str(row["problem"]),
        answer=str(row["answer"]),
        subject=str(row["subject"]).strip() or None,
        metadata={"task_group_id": group, "layout": "frontierscience-gold"},
        source=where,
    )


def _own_task(row: dict[str, Any], kind: TaskKind, where: str) -> ScienceTask:
    unknown = sorted(set(row) - OWN_REQUIRED - OWN_OPTIONAL)
    if unknown:
        allowed = ", ".join(sorted(OWN_REQUIRED | OWN_OPTIONAL))
        raise TaskFileError(f"{where}: field '{unknown[0]}': unknown field (allowed: {allowed})")
    task_id = _text_field(row, "id", where)
    question = _text_field(row, "question", where)
    assert task_id is not None and question is not None  # required fields are never None
    expected = "rubric" if kind == "research" else "answer"
    present = [name for name in ("answer", "rubric") if row.get(name) is not None]
    if kind == "research" and present == ["answer"]:
        expected = "answer"  # our rows may call the rubric 'answer', as the gold layout does
    if len(present) > 1:
        raise TaskFileError(f"{where}: field 'rubric': give either 'answer' or 'rubric', not both")
    if kind != "research" and present == ["rubric"]:
        raise TaskFileError(f"{where}: field 'rubric': only research tasks have a rubric; use 'answer'")
    reference = _text_field(row, expected, where)
    assert reference is not None
    subject = _text_field(row, "subject", where, required=False)
    metadata = row.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise TaskFileError(f"{where}: field 'metadata': expected an object, got {type(metadata).__name__}")
    return ScienceTask(
        id=task_id.strip(),
        question=question,
        answer=reference,
        subject=subject.strip() or None if subject is not None else None,
        metadata=dict(metadata),
        source=where,
    )
