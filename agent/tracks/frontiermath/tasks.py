"""The FrontierMath task schema: one problem, its answer type, and how to verify an answer."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from proctor.agent.inputs.tasks import load_task_models
from proctor.agent.tracks.frontiermath.checks import UnparseableCode, parse_bounded
from proctor.agent.tracks.frontiermath.sandbox_driver import asks_for_approximation


class FrontierMathTask(BaseModel):
    """Required: id, question, answer_type and exactly one of verification_code / answer."""

    # Unknown keys are typos far more often than intent; free-form data belongs in metadata.
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    question: str = Field(min_length=1)
    answer_type: str = Field(min_length=1)
    # Source defining verify(a) -> bool; it runs in a sandbox with its own time limit.
    verification_code: str | None = None
    # The expected value as Python/sympy source, compared by type inside a sandbox.
    answer: str | None = None
    # Absolute tolerance for numeric comparison with ``answer``: NaN would make every answer
    # wrong and infinity every answer right, so only finite, non-negative numbers load.
    tolerance: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    subject: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    # Source of a correct answer(); `proctor validate` runs it through the submission path.
    reference_solution: str | None = None

    @field_validator("id", mode="before")
    @classmethod
    def _id_as_text(cls, value: Any) -> Any:
        # Numeric ids are common in hand-written files; they name the task all the same.
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("answer", mode="before")
    @classmethod
    def _answer_as_source(cls, value: Any) -> Any:
        # A bare JSON number is the obvious way to write an integer answer.
        if isinstance(value, int | float) and not isinstance(value, bool):
            return repr(value)
        return value

    @field_validator("answer")
    @classmethod
    def _answer_is_expression(cls, value: str | None) -> str | None:
        if value is not None:
            _parse(value, "eval", "a Python expression")
        return value

    @field_validator("verification_code")
    @classmethod
    def _defines_verify(cls, value: str | None) -> str | None:
        if value is not None:
            _require_function(value, "verify")
        return value

    @field_validator("reference_solution")
    @classmethod
    def _defines_answer(cls, value: str | None) -> str | None:
        if value is not None:
            _require_function(value, "answer")
        return value

    @model_validator(mode="after")
    def _exactly_one_verification(self) -> FrontierMathTask:
        if (self.verification_code is None) == (self.answer is None):
            raise ValueError("exactly one of 'verification_code' and 'answer' is required")
        if self.tolerance is not None and self.answer is None:
            raise ValueError("'tolerance' applies only to tasks with an 'answer'")
        return self

    @property
    def quickstart(self) -> bool:
        return bool(self.metadata.get("quickstart", False))

    @property
    def exact_answer_type(self) -> bool:
        """Whether the answer type promises an exact value: the same words the verifier's gate reads."""
        return not asks_for_approximation(self.answer_type)


def _parse(source: str, mode: str, what: str) -> ast.AST:
    try:
        return parse_bounded(source, mode)
    except SyntaxError as exc:
        raise ValueError(f"not {what}: {exc.msg} (line {exc.lineno})") from None
    except UnparseableCode as exc:
        # Nested past what Python's parser takes: one line naming the field, not a traceback.
        raise ValueError(f"not {what}: {exc}") from None


def _require_function(source: str, name: str) -> None:
    tree = _parse(source, "exec", "valid Python")
    assert isinstance(tree, ast.Module)
    if not any(isinstance(node, ast.FunctionDef) and node.name == name for node in tree.body):
        raise ValueError(f"must define a top-level function {name}()")


def load_frontiermath_tasks(path: Path) -> list[FrontierMathTask]:
    return load_task_models(path, FrontierMathTask)
