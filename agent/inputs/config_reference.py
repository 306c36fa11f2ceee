"""docs/config.md, generated from the config models: every field, its type, default, limits and
the comment that explains it in agent/inputs/config.py.

Regenerate with ``python3 -m proctor.agent.inputs.config_reference > docs/config.md``;
tests/runner/test_config_reference.py fails when the page and the models disagree.
"""

from __future__ import annotations

import ast
import inspect
import json
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from proctor.agent.inputs.config import BudgetConfig, ModelConfig, RunConfig, SandboxConfig
from proctor.sandbox import SandboxSpec

# Sections in reading order: the run, then the mappings its fields hold.
SECTIONS: tuple[tuple[str, type[BaseModel]], ...] = (
    ("run config (top level)", RunConfig),
    ("`models[]` and `judge`", ModelConfig),
    ("`budget`", BudgetConfig),
    ("`sandbox`", SandboxConfig),
)
_LIMITS = {"gt": ">", "ge": "≥", "lt": "<", "le": "≤"}


def _type_name(annotation: Any) -> str:
    if annotation is type(None):
        return "null"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "mapping"
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " \\| ".join(json.dumps(arg) for arg in args)
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(_type_name(arg) for arg in args)
    if origin is list:
        return f"list of {_type_name(args[0])}"
    if origin is dict:
        return "mapping"
    if isinstance(annotation, type) and issubclass(annotation, Path):
        return "path"
    if annotation is typing.Any:
        return "any"
    return getattr(annotation, "__name__", str(annotation))


def _default(info: FieldInfo) -> str:
    if info.default_factory is not None:
        value = info.default_factory()  # type: ignore[call-arg]
        return "(section below)" if isinstance(value, BaseModel) else f"`{json.dumps(value)}`"
    if info.default is PydanticUndefined:
        return "required"
    return f"`{json.dumps(info.default, default=str)}`"


def _limits(info: FieldInfo) -> str:
    found = [
        f"{symbol} {getattr(item, name):,}"
        for item in info.metadata
        for name, symbol in _LIMITS.items()
        if getattr(item, name, None) is not None
    ]
    return ", ".join(found)


def _comments(model: type) -> dict[str, str]:
    """Each field's explaining comment: the ``#`` lines right above it in the class body; a
    field the model derives from the sandbox's spec is explained where the spec declares it."""
    derived = _comments(SandboxSpec) if model is SandboxConfig else {}
    return {**derived, **_own_comments(model)}


def _own_comments(model: type) -> dict[str, str]:
    lines, _ = inspect.getsourcelines(model)
    tree = ast.parse("".join(lines))  # a top-level class: its source parses as it is
    found: dict[str, str] = {}
    [cls] = [node for node in tree.body if isinstance(node, ast.ClassDef)]
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            above: list[str] = []
            index = node.lineno - 2
            while index >= 0 and lines[index].strip().startswith("#"):
                above.insert(0, lines[index].strip().removeprefix("#").strip())
                index -= 1
            if above:
                found[node.target.id] = " ".join(above).replace("|", "\\|")
    return found


def render() -> str:
    out = [
        "# Config reference",
        "",
        "Generated from the pydantic models in `agent/inputs/config.py` by",
        "`python3 -m proctor.agent.inputs.config_reference > docs/config.md`; do not edit by hand",
        "(`tests/runner/test_config_reference.py::test_the_page_is_what_the_models_say` fails when",
        "it is stale). How flags override these fields: [runs.md](runs.md). An unknown key is an",
        "error with a guess at the one meant.",
    ]
    for title, model in SECTIONS:
        comments = _comments(model)
        out += ["", f"## {title}", "", "| field | type | default | limits | what |", "|---|---|---|---|---|"]
        for name, info in model.model_fields.items():
            # A name the sandbox owns lists the sandbox's own choices (sandbox/spec.py).
            extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
            choices = extra.get("enum")
            kind = " \\| ".join(json.dumps(c) for c in choices) if isinstance(choices, list) else None
            row = [f"`{name}`", kind or _type_name(info.annotation), _default(info), _limits(info)]
            out.append("| " + " | ".join([*row, comments.get(name, "")]) + " |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(render(), end="")
