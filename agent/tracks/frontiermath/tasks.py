"""The FrontierMath task schema: one problem, its answer type, the kind of value it wants, and how
to verify an answer."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from proctor.agent.inputs.tasks import load_task_models
from proctor.agent.tracks.frontiermath.checks import UnparseableCode, parse_bounded

# The kinds of value a task can want (docs/frontiermath.md, "Exact means exact"). Only the task
# file's own field, or the one inference below, decides; the prose of answer_type never does.
AnswerKind = Literal["exact", "floating-point", "modular", "p-adic"]


class FrontierMathTask(BaseModel):
    """Required: id, question, answer_type and exactly one of verification_code / answer."""

    # Unknown keys are typos far more often than intent; free-form data belongs in metadata.
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    question: str = Field(min_length=1)
    answer_type: str = Field(min_length=1)
    # The kind of value verify()/the comparison may see. Unset: inferred once, at load
    # (infer_answer_kind); the record of which it was is kept for validate and --dry-run.
    answer_kind: AnswerKind | None = None
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
    _answer_kind_origin: str = PrivateAttr(default="stated in the task file")

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
        if self.answer_kind is None:
            self.answer_kind, self._answer_kind_origin = infer_answer_kind(self)
        elif self.tolerance is not None and self.answer_kind != "floating-point":
            # |a - b| <= tolerance compares approximations; beside an exact kind it is a typo.
            raise ValueError(
                f"'tolerance' compares approximations, but 'answer_kind' is {self.answer_kind!r}; "
                "state 'floating-point' or drop the tolerance"
            )
        return self

    @property
    def quickstart(self) -> bool:
        return bool(self.metadata.get("quickstart", False))

    @property
    def wanted_kind(self) -> str:
        """The kind of value the task wants: stated, or inferred at load (never None after loading)."""
        return self.answer_kind or "exact"

    @property
    def answer_kind_origin(self) -> str:
        """Where the kind came from: "stated in the task file" or "inferred: <evidence>"."""
        return self._answer_kind_origin

    @property
    def exact_kind(self) -> bool:
        return self.wanted_kind == "exact"


def infer_answer_kind(task: FrontierMathTask) -> tuple[AnswerKind, str]:
    """The kind a task without an ``answer_kind`` wants, from structured evidence only, and why.

    Evidence is a field whose meaning is fixed, never words of the prose: a stated ``tolerance``
    is a comparison of approximations, and a reference ``answer`` whose outermost form is
    finite-field values is a modular value. Nothing else is evidence of an inexact kind, so
    without one the task is exact (a task that wants a modular or p-adic value states it). The answer
    type's text is not read: "an integer, not a floating-point number" and "the number of
    elements of a finite field" name kinds they do not ask for.
    """
    if task.tolerance is not None:
        return "floating-point", f"inferred: a tolerance ({task.tolerance:g}) is stated"
    if task.answer is not None and _reference_builds_field_elements(task.answer):
        return "modular", "inferred: the reference 'answer' is built as finite-field values"
    return "exact", "inferred: no answer_kind and no tolerance, so exact"


# Sympy's names for a finite field in the reference's namespace (sandbox_driver.evaluate_reference).
_FIELD_CONSTRUCTORS = frozenset({"GF", "FF", "FiniteField"})


def _reference_builds_field_elements(source: str) -> bool:
    """Whether the reference expression is, at its outermost level, finite-field values: an element
    ``GF(p)(v)``, or a ``Poly`` with a ``modulus`` or a ``GF(p)`` domain; a list, tuple or set of
    them counts when every item is one. Read from the syntax, never evaluated. Only the outermost
    form counts: ``int(GF(7)(3))`` or ``GF(7)(3) + 1`` is not read as modular (when in doubt,
    exact), so a conversion or a negation inside the expression never admits a kind."""
    try:
        body = ast.parse(source, "<answer>", "eval").body
    except SyntaxError:  # the field's own validator reports it
        return False
    items = body.elts if isinstance(body, ast.List | ast.Tuple | ast.Set) else [body]
    return bool(items) and all(_is_field_value(item) for item in items)


def _is_field_constructor(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FIELD_CONSTRUCTORS
    )


def _names_a_field(node: ast.expr) -> bool:
    """``GF(p)``, or a domain written as text, ``'GF(p)'`` (sympy parses both)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.replace(" ", "").startswith(("GF(", "FF("))
    return _is_field_constructor(node)


def _is_field_value(node: ast.expr) -> bool:
    if not isinstance(node, ast.Call):
        return False
    if _is_field_constructor(node.func):  # GF(p)(v)
        return True
    if isinstance(node.func, ast.Name) and node.func.id == "Poly":
        for keyword in node.keywords:
            if keyword.arg == "modulus":
                return True
            if keyword.arg == "domain" and _names_a_field(keyword.value):
                return True
    return False


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
