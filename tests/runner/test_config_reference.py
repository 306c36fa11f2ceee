"""docs/config.md is generated from the config models and fails here when it is stale."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from proctor.agent.inputs.config import RunConfig
from proctor.agent.inputs.config_problems import _models_in
from proctor.agent.inputs.config_reference import SECTIONS, render

PAGE = Path(__file__).resolve().parents[2] / "docs" / "config.md"


def test_the_page_is_what_the_models_say() -> None:
    assert PAGE.read_text(encoding="utf-8") == render(), (
        "docs/config.md is stale: python3 -m proctor.agent.inputs.config_reference > docs/config.md"
    )


def test_every_model_a_config_holds_has_a_section() -> None:
    reachable: set[type[BaseModel]] = set()
    pending: list[type[BaseModel]] = [RunConfig]
    while pending:
        model = pending.pop()
        if model not in reachable:
            reachable.add(model)
            pending += [
                inner for info in model.model_fields.values() for inner in _models_in(info.annotation)
            ]
    assert reachable == {model for _, model in SECTIONS}


def test_every_field_has_a_type_a_default_and_an_explanation() -> None:
    rows = {
        line.split(" | ")[0].removeprefix("| ") for line in render().splitlines() if line.startswith("| `")
    }
    for _, model in SECTIONS:
        for name in model.model_fields:
            assert f"`{name}`" in rows
    for line in render().splitlines():
        if line.startswith("| `"):
            cells = [cell.strip() for cell in line.strip("|").split(" | ")]
            assert cells[1] and cells[2] and cells[-1], line
