"""Read task files shared by every track: JSONL, a JSON list or a YAML list.

Each entry keeps where it came from (file, line, list index) so that a validation
error can name the exact place: ``tasks.jsonl:7: field 'answer_type': field required``.
Tracks bring their own pydantic model and call :func:`load_task_models`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from proctor.agent.errors import UserError
from proctor.agent.inputs.input_files import (
    MAX_TASK_FILE_BYTES,
    DuplicateKey,
    UniqueKeyLoader,
    check_data,
    read_text_input,
    too_deep,
    unique_pairs,
    unreadable_value,
)

ModelT = TypeVar("ModelT", bound=BaseModel)


class TaskFileError(UserError):
    """A task file is missing, unreadable or holds an invalid entry; the message names where."""


@dataclass(frozen=True)
class TaskEntry:
    """One raw entry of a task file and where it sits in that file."""

    data: dict[str, Any]
    path: Path
    line: int | None
    # Position in a JSON/YAML list (0-based); None for JSONL, where the line says it all.
    index: int | None = None
    # Line of each top-level field, where the format lets us know it (YAML).
    field_lines: dict[str, int] = field(default_factory=dict)

    def location(self, field_name: str | None = None) -> str:
        line = self.field_lines.get(field_name, self.line) if field_name else self.line
        if self.index is None:
            return f"{self.path}:{line}" if line is not None else str(self.path)
        where = f"{self.path}: entry {self.index}"
        return f"{where} (line {line})" if line is not None else where


def read_task_entries(path: Path) -> list[TaskEntry]:
    """Read every entry of ``path`` without validating its fields."""
    path = Path(path)
    text = read_text_input(path, "task file", max_bytes=MAX_TASK_FILE_BYTES, error=TaskFileError)
    reader = _reader_for(path, text)
    try:
        entries = reader(path, text)
    except RecursionError:
        raise TaskFileError(too_deep(str(path))) from None
    if not entries:
        raise TaskFileError(f"{path}: no tasks in file")
    for entry in entries:
        # NaN, infinities, lone surrogates and deep nesting are refused wherever they sit.
        check_data(entry.data, _locator(entry), error=TaskFileError)
    return entries


def _locator(entry: TaskEntry) -> Callable[[list[str]], str]:
    return lambda where: entry.location(where[0] if where else None)


def load_task_models(
    path: Path,
    model: type[ModelT],
    *,
    id_of: Callable[[ModelT], str] = lambda task: str(task.id),  # type: ignore[attr-defined]
) -> list[ModelT]:
    """Validate every entry of ``path`` against ``model``; duplicate ids are an error."""
    tasks: list[ModelT] = []
    seen: dict[str, TaskEntry] = {}
    for entry in read_task_entries(path):
        task = validate_entry(entry, model)
        task_id = id_of(task)
        if task_id in seen:
            raise TaskFileError(
                f"{entry.location('id')}: field 'id': duplicate id {task_id!r} "
                f"(first seen at {seen[task_id].location('id')})"
            )
        seen[task_id] = entry
        tasks.append(task)
    return tasks


def validate_entry(entry: TaskEntry, model: type[ModelT]) -> ModelT:
    try:
        return model.model_validate(entry.data)
    except ValidationError as exc:
        raise TaskFileError(describe_validation_error(entry, exc)) from None


def describe_validation_error(entry: TaskEntry, exc: ValidationError) -> str:
    """One line per problem, each prefixed by the place it refers to, joined by '; '."""
    parts: list[str] = []
    for index, error in enumerate(exc.errors(include_url=False)):
        loc = [str(p) for p in error["loc"]]
        message = _plain_message(error)
        top_field = loc[0] if loc else None
        prefix = entry.location(top_field) if index == 0 else ""
        where = f"field '{'.'.join(loc)}': " if loc else ""
        text = f"{where}{message}"
        parts.append(f"{prefix}: {text}" if prefix else text)
    return "; ".join(parts)


def _plain_message(error: Any) -> str:
    message = str(error["msg"])
    # Validators raise "Value error, <our text>"; keep only our text.
    for prefix in ("Value error, ", "Assertion failed, "):
        if message.startswith(prefix):
            message = message[len(prefix) :]
    return message[:1].lower() + message[1:]


Reader = Callable[[Path, str], list[TaskEntry]]


def _reader_for(path: Path, text: str) -> Reader:
    suffix = path.suffix.lower()
    if suffix in {".jsonl", ".ndjson"}:
        return _read_jsonl
    if suffix == ".json":
        return _read_json_list
    if suffix in {".yaml", ".yml"}:
        return _read_yaml_list
    first = text.lstrip()[:1]
    if first == "[":
        return _read_json_list
    if first == "{":
        return _read_jsonl
    return _read_yaml_list


def _require_mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TaskFileError(f"{where}: expected a task object, got {type(value).__name__}")
    return {str(k): v for k, v in value.items()}


def _read_jsonl(path: Path, text: str) -> list[TaskEntry]:
    entries: list[TaskEntry] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line, object_pairs_hook=unique_pairs)
        except json.JSONDecodeError as exc:
            raise TaskFileError(f"{path}:{number}: invalid JSON: {exc.msg} (column {exc.colno})") from None
        except DuplicateKey as exc:
            raise TaskFileError(f"{path}:{number}: field '{exc.key}': {exc}") from None
        except ValueError as exc:
            raise TaskFileError(f"{path}:{number}: {unreadable_value(exc)}") from None
        entries.append(TaskEntry(_require_mapping(value, f"{path}:{number}"), path, number))
    return entries


def _read_json_list(path: Path, text: str) -> list[TaskEntry]:
    """Decode the top-level list item by item so each entry keeps its line number."""
    decoder = json.JSONDecoder(object_pairs_hook=unique_pairs)
    position = _skip_space(text, 0)
    if text[position : position + 1] != "[":
        raise TaskFileError(f"{path}:{_line_at(text, position)}: expected a JSON list of tasks")
    position = _skip_space(text, position + 1)
    entries: list[TaskEntry] = []
    while text[position : position + 1] != "]":
        line = _line_at(text, position)
        try:
            value, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError as exc:
            raise TaskFileError(
                f"{path}:{exc.lineno}: invalid JSON: {exc.msg} (column {exc.colno})"
            ) from None
        except DuplicateKey as exc:
            raise TaskFileError(
                f"{path}: entry {len(entries)} (line {line}): field '{exc.key}': {exc}"
            ) from None
        except ValueError as exc:
            raise TaskFileError(
                f"{path}: entry {len(entries)} (line {line}): {unreadable_value(exc)}"
            ) from None
        index = len(entries)
        entries.append(
            TaskEntry(_require_mapping(value, f"{path}: entry {index} (line {line})"), path, line, index)
        )
        position = _skip_space(text, position)
        if text[position : position + 1] == ",":
            position = _skip_space(text, position + 1)
        elif text[position : position + 1] != "]":
            raise TaskFileError(f"{path}:{_line_at(text, position)}: invalid JSON: expected ',' or ']'")
    trailing = _skip_space(text, position + 1)
    if trailing < len(text):
        raise TaskFileError(f"{path}:{_line_at(text, trailing)}: invalid JSON: extra data after the list")
    return entries


def _skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position] in " \t\r\n":
        position += 1
    return position


def _line_at(text: str, position: int) -> int:
    return text.count("\n", 0, position) + 1


def _read_yaml_list(path: Path, text: str) -> list[TaskEntry]:
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        # A SafeLoader that also refuses a key given twice (PyYAML keeps the last silently).
        values = yaml.load(text, Loader=UniqueKeyLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise TaskFileError(f"{where}: invalid YAML: {getattr(exc, 'problem', None) or exc}") from None
    except ValueError as exc:
        raise TaskFileError(f"{path}: {unreadable_value(exc)}") from None
    if values is None:
        return []
    if not isinstance(values, list) or not isinstance(root, yaml.SequenceNode):
        raise TaskFileError(f"{path}:1: expected a YAML list of tasks")
    entries: list[TaskEntry] = []
    for index, (node, value) in enumerate(zip(root.value, values, strict=True)):
        line = node.start_mark.line + 1
        data = _require_mapping(value, f"{path}: entry {index} (line {line})")
        field_lines: dict[str, int] = {}
        if isinstance(node, yaml.MappingNode):
            for key_node, _ in node.value:
                field_lines[str(key_node.value)] = key_node.start_mark.line + 1
        entries.append(TaskEntry(data, path, line, index, field_lines))
    return entries
