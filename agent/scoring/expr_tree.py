"""Expression trees for EED: sympy expressions as labelled, ordered trees.

Node kinds follow the published scorer: numbers (integers, rationals, floats, pi, E, +-oo) and
symbols are leaves; Add, Mul and Pow are n-ary operator nodes over ``expr.args`` in sympy's own
order; applied functions are nodes named by the function. Anything else (I, zoo, nan, EulerGamma,
Max, Derivative, relations, ...) is unsupported, which the scorer turns into a zero score.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

NodeKind = Literal["number", "symbol", "operator", "function"]


class UnsupportedExpression(ValueError):
    """The expression holds a sympy type the published tree builder does not accept."""


@dataclass(frozen=True)
class TreeNode:
    """One node. ``label`` is compared for updates; ``kind`` is the node's category."""

    kind: NodeKind
    name: str
    children: tuple[TreeNode, ...] = ()
    size: int = field(init=False, compare=False)

    def __post_init__(self) -> None:
        # Cached once: the edit-distance costs ask for subtree sizes many times.
        object.__setattr__(self, "size", 1 + sum(child.size for child in self.children))

    @property
    def label(self) -> str:
        return f"{self.kind}_{self.name}"

    def render(self, indent: int = 0) -> str:
        """Indented outline, one node per line (used in tests and debug output)."""
        lines = ["  " * indent + self.label]
        lines.extend(child.render(indent + 1) for child in self.children)
        return "\n".join(lines)


def leaf(kind: NodeKind, name: str) -> TreeNode:
    return TreeNode(kind, name)


def node(kind: NodeKind, name: str, *children: TreeNode) -> TreeNode:
    return TreeNode(kind, name, tuple(children))


def sympy_to_tree(expr: Any) -> TreeNode:
    """Convert a sympy expression; raises UnsupportedExpression for types outside the published set."""
    import sympy

    number_types = (
        sympy.Integer,
        sympy.core.numbers.Pi,
        sympy.core.numbers.Exp1,
        sympy.Float,
        sympy.Rational,
        sympy.core.numbers.Infinity,
        sympy.core.numbers.NegativeInfinity,
    )
    if isinstance(expr, number_types):
        return leaf("number", str(expr))
    if isinstance(expr, sympy.Symbol):
        return leaf("symbol", str(expr))
    if isinstance(expr, (sympy.Add, sympy.Mul, sympy.Pow)):
        return TreeNode("operator", type(expr).__name__, tuple(sympy_to_tree(arg) for arg in expr.args))
    if isinstance(expr, sympy.Function):
        return TreeNode("function", expr.func.__name__, tuple(sympy_to_tree(arg) for arg in expr.args))
    raise UnsupportedExpression(f"unsupported sympy type {type(expr).__name__}: {expr}")
