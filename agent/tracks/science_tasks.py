"""Task files for the judge-based and PHYBench tracks.

These layouts are accepted, row by row, in one file:

* the official FrontierScience gold set (``problem``, ``answer``, ``subject``,
  ``task_group_id``); in the research split ``answer`` is the rubric. Fields beyond these are
  ignored, so a later release with extra columns still loads;
* our own format (``id``, ``question``, ``answer`` or ``rubric``, optional ``subject`` and
  ``metadata``); unknown fields are errors, because there a typo would silently drop data;
* for PHYBench, the published dataset's rows (``id``, ``content``, ``answer``, optional ``tag``
  as the subject; ``solution`` and other columns are kept out of the prompt and ignored).

Gold rows have no ``id``; theirs is the ``task_group_id``. The research split holds one item
twice under the same ``task_group_id``: its first row keeps the plain id and later rows get
``#2``, ``#3``..., so every row loads, ids are unique, and ids do not depend on row order
except among the duplicates themselves.

Files may be JSONL, or a JSON or YAML list, read by the shared reader in ``proctor.agent.inputs.tasks``.
Errors read ``file:line: field 'x': message``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from proctor.agent.inputs.tasks import TaskEntry, TaskFileError, read_task_entries

TaskKind = Literal["olympiad", "research", "phybench"]

GOLD_FIELDS = frozenset({"problem", "answer", "subject", "task_group_id"})
OWN_REQUIRED = frozenset({"id", "question"})
OWN_OPTIONAL = frozenset({"answer", "rubric", "subject", "metadata"})


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
    tasks: list[ScienceTask] = []
    seen: dict[str, TaskEntry] = {}
    gold_occurrences: dict[str, int] = {}
    for entry in read_task_entries(path):
        row = entry.data
        if kind == "phybench" and "content" in row and "question" not in row:
            task = _phybench_task(entry)
        elif "id" in row or "question" in row:
            task = _own_task(entry, kind)
        elif "problem" in row:
            task = _gold_task(entry, gold_occurrences)
        else:
            raise TaskFileError(
                f"{entry.location()}: field 'question': missing (own format needs 'id' and 'question'; "
                "the gold layout needs 'problem', 'answer', 'subject', 'task_group_id')"
            )
        if task.id in seen:
            raise TaskFileError(
                f"{entry.location('id')}: field 'id': duplicate id {task.id!r} "
                f"(first at {seen[task.id].location('id')})"
            )
        seen[task.id] = entry
        tasks.append(task)
    return tasks


def _text_field(entry: TaskEntry, name: str, *, required: bool = True) -> str | None:
    value = entry.data.get(name)
    where = entry.location(name)
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


def _gold_task(entry: TaskEntry, occurrences: dict[str, int]) -> ScienceTask:
    row = entry.data
    for name in sorted(GOLD_FIELDS):
        _text_field(entry, name)
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
        source=entry.location(),
    )


def _own_task(entry: TaskEntry, kind: TaskKind) -> ScienceTask:
    row = entry.data
    unknown = sorted(set(row) - OWN_REQUIRED - OWN_OPTIONAL)
    if unknown:
        allowed = ", ".join(sorted(OWN_REQUIRED | OWN_OPTIONAL))
        raise TaskFileError(
            f"{entry.location(unknown[0])}: field '{unknown[0]}': unknown field (allowed: {allowed})"
        )
    task_id = _text_field(entry, "id")
    question = _text_field(entry, "question")
    assert task_id is not None and question is not None  # required fields are never None
    expected = "rubric" if kind == "research" else "answer"
    present = [name for name in ("answer", "rubric") if row.get(name) is not None]
    if kind == "research" and present == ["answer"]:
        expected = "answer"  # our rows may call the rubric 'answer', as the gold layout does
    if len(present) > 1:
        raise TaskFileError(
            f"{entry.location('rubric')}: field 'rubric': give either 'answer' or 'rubric', not both"
        )
    if kind != "research" and present == ["rubric"]:
        raise TaskFileError(
            f"{entry.location('rubric')}: field 'rubric': only research tasks have a rubric; use 'answer'"
        )
    reference = _text_field(entry, expected)
    assert reference is not None
    subject = _text_field(entry, "subject", required=False)
    metadata = row.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise TaskFileError(
            f"{entry.location('metadata')}: field 'metadata': "
            f"expected an object, got {type(metadata).__name__}"
        )
    return ScienceTask(
        id=task_id.strip(),
        question=question,
        answer=reference,
        subject=subject.strip() or None if subject is not None else None,
        metadata=dict(metadata),
        source=entry.location(),
    )


def _phybench_task(entry: TaskEntry) -> ScienceTask:
    task_id = _text_field(entry, "id")
    question = _text_field(entry, "content")
    reference = _text_field(entry, "answer")
    assert task_id is not None and question is not None and reference is not None
    subject = _text_field(entry, "tag", required=False)
    return ScienceTask(
        id=task_id.strip(),
        question=question,
        answer=reference,
        subject=subject.strip() or None if subject is not None else None,
        metadata={"layout": "phybench"},
        source=entry.location(),
    )
