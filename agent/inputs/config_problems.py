"""Every problem of a run config at once, each on a line of its own with its YAML line number.

A config with four mistakes is fixed in one edit, not four runs: pydantic's problems (unknown
keys, wrong types, missing fields) and the loader's own checks (a task file that is not there,
a model name without its provider, an unknown protocol) are gathered, then reported together,
in the file's order. An unknown key gets the same hint a flag of that name gets on the command
line (agent/inputs/inspect_names.py), else the closest real field at its place.
"""

from __future__ import annotations

import difflib
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from proctor.agent.inputs.inspect_names import config_hint

Loc = tuple[str | int, ...]

# Every problem is listed; past this many (a generated file gone wrong) the rest are counted.
MAX_LISTED_PROBLEMS = 20
# A key shown in a message is cut here: the file, not the message, is the place to read it whole.
MAX_SHOWN_KEY = 80
# What a missing required field needs, in the words of both places that can give it.
MISSING_HINTS = {
    "tasks": "a task file is needed (tasks: FILE, or --tasks FILE)",
    "models": "at least one model is needed (models: [openai/NAME], or --model openai/NAME)",
}
_ABSENT = object()


@dataclass(frozen=True)
class Problem:
    loc: Loc
    message: str
    # A required field that is not there: its line is where it would go.
    missing: bool = False
    # A key the file may not hold at its place.
    unknown: bool = False


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models a field holds: itself, or inside ``X | None``, ``list[X]``, ``dict[str, X]``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for arg in typing.get_args(annotation) for model in _models_in(arg)]


def fields_at(model: type[BaseModel], loc: Loc) -> list[str]:
    """The field names of the model found by following ``loc`` (field names; list indexes skipped)."""
    current = model
    for part in loc:
        if not isinstance(part, str):
            continue  # a list index or dict key: the same model continues
        info = current.model_fields.get(part)
        inner = _models_in(info.annotation) if info is not None else []
        if not inner:
            return []
        current = inner[0]
    return list(current.model_fields)


def did_you_mean(model: type[BaseModel] | None, loc: Loc) -> str:
    """`` (did you mean 'trials'?)`` for an unknown key close to a real one at that place, else ''."""
    if model is None or not loc or not isinstance(loc[-1], str):
        return ""
    close = difflib.get_close_matches(loc[-1], fields_at(model, loc[:-1]), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def unknown_key_hint(model: type[BaseModel] | None, loc: Loc) -> str:
    """Inspect's name for something (``epochs``, ``max_connections``) gets what does that job
    here, as its flag would; any other unknown key the closest real field, if one is close."""
    if loc and isinstance(loc[-1], str):
        inspect = config_hint(loc[-1])
        if inspect:
            return inspect
    return did_you_mean(model, loc)


def place(loc: Loc, prefix: str = "") -> str:
    parts = [str(part) for part in loc]
    if parts:
        parts[-1] = parts[-1] if len(parts[-1]) <= MAX_SHOWN_KEY else parts[-1][:MAX_SHOWN_KEY] + "…"
    return prefix + (".".join(parts) or "(top level)")


def problems_of(
    error: ValidationError, model: type[BaseModel] | None, *, missing_hints: bool = False
) -> list[Problem]:
    """``error``'s problems; ``missing_hints`` says how to give a missing tasks or models field
    (a run config's; a run directory's header is not fixed with a flag)."""
    problems = []
    for detail in error.errors():
        loc = tuple(detail.get("loc", ()))
        kind = detail.get("type")
        message = str(detail.get("msg", "invalid")).removeprefix("Value error, ")
        if kind == "extra_forbidden":
            message += unknown_key_hint(model, loc)
        elif missing_hints and kind == "missing" and len(loc) == 1 and loc[0] in MISSING_HINTS:
            message = f"missing: {MISSING_HINTS[str(loc[0])]}"
        problems.append(Problem(loc, message, missing=kind == "missing", unknown=kind == "extra_forbidden"))
    return problems


def value_at(data: Any, loc: Loc) -> Any:
    for part in loc:
        in_list = isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data)
        if in_list or (isinstance(data, dict) and part in data):
            data = data[part]
        else:
            return _ABSENT
    return data


class YamlPlaces:
    """Where each field of a YAML file is written: a field's path -> the line of its key (or of
    its list item), read from the composed node tree, which keeps every node's position."""

    def __init__(self, text: str) -> None:
        try:
            self._root: yaml.Node | None = yaml.compose(text, Loader=yaml.SafeLoader)
        except (yaml.YAMLError, RecursionError, ValueError):
            self._root = None  # the file was read already; lines are a courtesy, not a need

    def _walk(self, loc: Loc) -> tuple[yaml.Node | None, int | None]:
        node, line = self._root, None
        if node is not None:
            line = node.start_mark.line + 1
        for part in loc:
            if isinstance(node, yaml.MappingNode):
                pairs = [
                    (k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == str(part)
                ]
                if not pairs:  # a key brought in by a merge (<<), or not there at all
                    return None, line
                key, node = pairs[-1]
                line = key.start_mark.line + 1
            elif (
                isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value)
            ):
                node = node.value[part]
                line = node.start_mark.line + 1
            else:
                return None, line
        return node, line

    def line_of(self, loc: Loc) -> int | None:
        """The line where the field at ``loc`` is written; None when it is not in the file."""
        node, line = self._walk(loc)
        return line if node is not None else None

    def line_of_missing(self, loc: Loc, unknown_keys: Iterable[str]) -> int | None:
        """Where a missing field would go: on the line of an unknown key of its mapping that
        looks like it (``model:`` for ``models``), else where that mapping begins."""
        parent, line = self._walk(loc[:-1])
        if parent is None:
            return None
        close = difflib.get_close_matches(str(loc[-1]), list(unknown_keys), n=1, cutoff=0.6)
        if close:
            return self.line_of((*loc[:-1], close[0]))
        return line


@dataclass
class ProblemReport:
    """Problems found in ``source`` (a file, or "command line"), laid out one per line."""

    source: str
    # The file's own fields and where they are written; None when the source is not a file.
    places: YamlPlaces | None = None
    file_data: dict[str, Any] | None = None

    def _line(self, problem: Problem, checked: dict[str, Any], unknown: dict[Loc, list[str]]) -> int | None:
        if self.places is None or self.file_data is None:
            return None
        if problem.missing:
            parent = problem.loc[:-1]
            # Only where the file's mapping is the one checked (a flag did not replace it).
            if value_at(self.file_data, parent) is not value_at(checked, parent) and parent:
                return None
            return self.places.line_of_missing(problem.loc, unknown.get(parent, []))
        # A value a flag gave is not on any line of the file.
        written = value_at(self.file_data, problem.loc)
        if written is not _ABSENT:
            return (
                self.places.line_of(problem.loc) if _same(written, value_at(checked, problem.loc)) else None
            )
        # "openai/x" is shorthand for {name: openai/x}: its name is on the shorthand's line.
        entry = problem.loc[:-1]
        if problem.loc[-1:] == ("name",) and _same(
            value_at(self.file_data, entry), value_at(checked, problem.loc)
        ):
            return self.places.line_of(entry)
        return None

    def lines(self, problems: list[Problem], checked: dict[str, Any]) -> list[str]:
        unknown: dict[Loc, list[str]] = {}
        for problem in problems:
            if problem.unknown and isinstance(problem.loc[-1], str):
                unknown.setdefault(problem.loc[:-1], []).append(problem.loc[-1])
        located = [(self._line(p, checked, unknown), index, p) for index, p in enumerate(problems)]
        # The file's order; what no line holds (a flag's value) after it.
        # A missing field after the mistyped key on its line that it likely is.
        located.sort(key=lambda item: (item[0] is None, item[0] or 0, item[2].missing, item[1]))
        rendered = []
        for line, _, problem in located[:MAX_LISTED_PROBLEMS]:
            where = f"line {line}: " if line is not None else ""
            rendered.append(f"{self.source}: {where}field '{place(problem.loc)}': {problem.message}")
        if len(problems) > MAX_LISTED_PROBLEMS:
            rendered.append(f"{self.source}: (and {len(problems) - MAX_LISTED_PROBLEMS} more problems)")
        return rendered


def _same(written: Any, checked: Any) -> bool:
    try:
        return bool(written is checked or written == checked)
    except Exception:  # a comparison that refuses (it never should for YAML's types)
        return False


def overlaps(loc: Loc, others: Iterable[Loc]) -> bool:
    """Whether a problem at ``loc`` is already said by one at an enclosing or enclosed place."""
    return any(loc[: len(other)] == other or other[: len(loc)] == loc for other in others)
