"""The sympy side of EED: convert, simplify, test equivalence, build trees, measure distance.

Runs inside the worker process (proctor.agent.scoring.eed_worker), never in the caller, because sympy
steps can run for ever and only killing a process stops them. Before each step the pipeline calls
``on_step(name)`` so the parent knows which step is running and can apply that step's own time
limit (the published scorer limits simplify to 30 s and equals to 10 s and then carries on with
the unsimplified expression / "not equal"). A step listed in ``skip`` is one whose limit already
ran out in an earlier attempt: it is replaced by exactly that published fallback.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from proctor.agent.scoring.expr_tree import TreeNode, UnsupportedExpression, sympy_to_tree
from proctor.agent.scoring.latex_preprocess import Mode, preprocess
from proctor.agent.scoring.tree_edit import DISCOUNT_SLOPE, tree_edit_distance

# Steps the published scorer guards with its own time limit, and the fallback it then uses.
LIMITED_STEPS = ("simplify_reference", "simplify_answer", "simplify_difference", "equals")
StepHook = Callable[[str], None]
_CATEGORY_BY_PREFIX = (("convert", "convert"), ("simplify", "simplify"), ("equals", "equals"))
_CATEGORY_BY_STEP = {"build_trees": "tree", "distance": "distance"}


def step_category(step: str) -> str:
    """The timing category a step's seconds are counted under (convert, simplify, equals, ...)."""
    for prefix, category in _CATEGORY_BY_PREFIX:
        if step.startswith(prefix):
            return category
    return _CATEGORY_BY_STEP.get(step, "other")


def convert_latex(text: str, mode: Mode) -> Any:
    """LaTeX -> sympy exactly as the published ``master_convert`` configures latex2sympy2_extended."""
    from latex2sympy2_extended import latex2sympy
    from latex2sympy2_extended.latex2sympy2 import ConversionConfig
    from latex2sympy2_extended.math_normalization import NormalizationConfig

    normalization = NormalizationConfig(
        basic_latex=True, units=False, malformed_operators=True, nits=True, boxed="all", equations=False
    )
    conversion = ConversionConfig(
        interpret_as_mixed_fractions=False,
        interpret_simple_eq_as_assignment=False,
        interpret_contains_as_eq=True,
        lowercase_symbols=False,
    )
    return latex2sympy(
        preprocess(text, mode), normalization_config=normalization, conversion_config=conversion
    )


def score_from_distance(distance: float, reference_size: int) -> float:
    """100 for distance 0, else max(0, 60 - 100 * d / size) computed in the published float order."""
    if distance == 0.0:
        return 100.0
    return float(max(0.0, 100 * DISCOUNT_SLOPE - 100 * distance / reference_size))


class _Clock:
    """Accumulates seconds per category (convert, simplify, equals, other, tree, distance)."""

    def __init__(self, on_step: StepHook) -> None:
        self.seconds: dict[str, float] = {}
        self._on_step = on_step

    def run(self, step: str, action: Callable[[], Any]) -> Any:
        self._on_step(step)
        started = time.perf_counter()
        try:
            return action()
        finally:
            elapsed = time.perf_counter() - started
            category = step_category(step)
            self.seconds[category] = self.seconds.get(category, 0.0) + elapsed


def _result(status: str, clock: _Clock, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "status": status,
        "score": 0.0,
        "relative_distance": None,
        "distance": None,
        "reference_size": None,
        "answer_size": None,
        "detail": None,
        "fallbacks": [],
    }
    base.update(fields)
    base["timings"] = dict(clock.seconds)
    return base


def evaluated(expr: Any) -> Any:
    """``expr`` rebuilt bottom-up with sympy's evaluation on, so ``Mul(0, oo)`` becomes ``nan``.

    latex2sympy builds some products unevaluated. If a node cannot be rebuilt, it is kept as is.
    """
    try:
        if not expr.args:
            return expr
        return expr.func(*(evaluated(argument) for argument in expr.args))
    except Exception:
        return expr


def is_undefined(expr: Any) -> bool:
    import sympy

    try:
        return bool(expr.has(sympy.nan, sympy.zoo))
    except Exception:
        return False


def has_infinity(expr: Any) -> bool:
    import sympy

    try:
        return bool(expr.has(sympy.oo, -sympy.oo, sympy.zoo))
    except Exception:
        return False


def _short(expr: Any) -> str:
    text = str(expr)
    return text if len(text) <= 80 else text[:77] + "..."


@dataclass
class _ReferenceWork:
    """What is known about one reference: it is scored against many answers (trials, models)."""

    converted: Any = None
    simplified: Any = None  # posified, simplified and restored, exactly as the pipeline computes it
    error: str | None = None


class _ReferenceCache:
    """Small LRU of reference work. Sound because every step is deterministic for a given input;
    only completed steps are stored, so a step that ran out of time is never cached."""

    def __init__(self, capacity: int = 512) -> None:
        self._entries: OrderedDict[tuple[str, str], _ReferenceWork] = OrderedDict()
        self._capacity = capacity

    def get(self, mode: str, reference: str) -> _ReferenceWork:
        key = (mode, reference)
        entry = self._entries.pop(key, None) or _ReferenceWork()
        self._entries[key] = entry
        while len(self._entries) > self._capacity:
            self._entries.popitem(last=False)
        return entry

    def clear(self) -> None:
        self._entries.clear()


_REFERENCES = _ReferenceCache()


def run_pipeline(
    reference: str,
    answer: str,
    mode: Mode,
    *,
    skip: Iterable[str] = (),
    on_step: StepHook = lambda _step: None,
) -> dict[str, Any]:
    """Score one pair that already passed the string gates. Returns a plain, JSON-able dict."""
    import sympy

    skipped = set(skip)
    fallbacks = sorted(skipped)
    clock = _Clock(on_step)

    cached = _REFERENCES.get(mode, reference)
    if cached.error is not None:
        return _result("parse_error", clock, detail=cached.error)
    if cached.converted is None:
        try:
            cached.converted = clock.run("convert_reference", lambda: convert_latex(reference, mode))
        except Exception as exc:
            cached.error = f"reference: {type(exc).__name__}: {exc}"
            return _result("parse_error", clock, detail=cached.error)
    reference_expr = cached.converted
    try:
        answer_expr = clock.run("convert_answer", lambda: convert_latex(answer, mode))
    except Exception as exc:
        return _result("parse_error", clock, detail=f"answer: {type(exc).__name__}: {exc}")

    # Fixed mode: an undefined answer (0·∞, ∞−∞, 0/0, x/0) never counts as equivalent. The
    # converter keeps such products unevaluated, and simplify() then drops "0·∞" as if it were 0.
    infinity_only_in_answer = False
    converted_answer: Any = None
    if mode == "fixed":
        # Before evaluation, which turns "∞^0" into 1 and so "0·∞^0" into 0.
        infinity_only_in_answer = has_infinity(answer_expr) and not has_infinity(reference_expr)
        converted_answer = answer_expr
        reference_expr = clock.run("evaluate_reference", lambda: evaluated(reference_expr))
        answer_expr = clock.run("evaluate_answer", lambda: evaluated(answer_expr))
        for side, expr in (("reference", reference_expr), ("answer", answer_expr)):
            if is_undefined(expr):
                return _result("zero_gate:undefined", clock, detail=f"{side}: {_short(expr)} is undefined")

    def simplified(step: str, expr: Any) -> Any:
        if step in skipped:
            return expr  # published fallback: keep the unsimplified expression
        return clock.run(step, lambda: sympy.simplify(expr))

    try:
        # Published order: posify+simplify the reference, then the answer, then restore both.
        reference_from_cache = cached.simplified is not None and "simplify_reference" not in skipped
        if not reference_from_cache:
            positive_reference, reference_symbols = clock.run(
                "posify_reference", lambda: sympy.posify(reference_expr)
            )
            positive_reference = simplified("simplify_reference", positive_reference)
        positive_answer, answer_symbols = clock.run("posify_answer", lambda: sympy.posify(answer_expr))
        positive_answer = simplified("simplify_answer", positive_answer)
        if reference_from_cache:
            reference_expr = cached.simplified
        else:
            reference_expr = clock.run("restore_symbols", lambda: positive_reference.subs(reference_symbols))
            if "simplify_reference" not in skipped:
                cached.simplified = reference_expr
        answer_expr = clock.run("restore_symbols", lambda: positive_answer.subs(answer_symbols))
        if mode == "fixed" and is_undefined(answer_expr):
            return _result(
                "zero_gate:undefined",
                clock,
                fallbacks=fallbacks,
                detail=f"answer: simplifies to {_short(answer_expr)}",
            )
        difference = clock.run("expand_difference", lambda: sympy.expand(reference_expr - answer_expr))
        difference = simplified("simplify_difference", difference)
        if infinity_only_in_answer:
            pass  # an answer with ∞ cannot equal a finite reference, whatever simplify makes of it
        elif reference_expr == answer_expr or difference == 0:
            return _result(
                "equivalent",
                clock,
                score=100.0,
                relative_distance=0.0,
                distance=0.0,
                fallbacks=fallbacks,
                detail="simplified forms agree",
            )
        if (
            not infinity_only_in_answer
            and "equals" not in skipped
            and clock.run("equals", lambda: reference_expr.equals(answer_expr))
        ):
            return _result(
                "equivalent",
                clock,
                score=100.0,
                relative_distance=0.0,
                distance=0.0,
                fallbacks=fallbacks,
                detail="sympy equals() holds",
            )
    except MemoryError:
        return _result(
            "zero_gate:memory_limit",
            clock,
            fallbacks=fallbacks,
            detail="the worker's memory limit was reached during simplification",
        )
    except Exception as exc:
        return _result(
            "zero_gate:simplify_error", clock, fallbacks=fallbacks, detail=f"{type(exc).__name__}: {exc}"
        )

    if infinity_only_in_answer:
        # simplify() may have dropped the ∞ ("0·∞^0"); the distance is to what the answer wrote.
        answer_expr = converted_answer
    try:
        reference_tree: TreeNode = clock.run("build_trees", lambda: sympy_to_tree(reference_expr))
        answer_tree: TreeNode = clock.run("build_trees", lambda: sympy_to_tree(answer_expr))
    except UnsupportedExpression as exc:
        return _result("zero_gate:unsupported_expression", clock, fallbacks=fallbacks, detail=str(exc))
    except Exception as exc:  # e.g. str() of a 700,000-digit integer; the published code scores 0 too
        return _result(
            "zero_gate:tree_error", clock, fallbacks=fallbacks, detail=f"{type(exc).__name__}: {exc}"
        )

    distance = clock.run("distance", lambda: tree_edit_distance(answer_tree, reference_tree))
    size = reference_tree.size
    return _result(
        "ok",
        clock,
        score=score_from_distance(distance, size),
        relative_distance=distance / size,
        distance=distance,
        reference_size=size,
        answer_size=answer_tree.size,
        fallbacks=fallbacks,
    )
