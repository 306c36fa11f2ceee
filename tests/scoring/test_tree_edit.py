"""Expression trees and extended Zhang–Shasha distances, checked against values worked out by hand."""

from __future__ import annotations

import pytest
import sympy as sp

from proctor.agent.scoring.eed_pipeline import score_from_distance
from proctor.agent.scoring.expr_tree import TreeNode, UnsupportedExpression, leaf, node, sympy_to_tree
from proctor.agent.scoring.tree_edit import subtree_cost, tree_edit_distance

m, g, v, ell, x, y = sp.symbols("m g v l x y", positive=True)


def s(name: str) -> TreeNode:
    return leaf("symbol", name)


def n(value: str) -> TreeNode:
    return leaf("number", value)


def op(name: str, *children: TreeNode) -> TreeNode:
    return node("operator", name, *children)


# 2*m*g + 4*m*v**2/l, drawn by hand: Add over two Mul terms; sympy keeps numbers first, then
# symbols and powers in its canonical order; 1/l is Pow(l, -1).
HAND_TREE = op(
    "Add",
    op("Mul", n("2"), s("g"), s("m")),
    op("Mul", n("4"), s("m"), op("Pow", s("l"), n("-1")), op("Pow", s("v"), n("2"))),
)


def test_tree_of_2mg_plus_4mv2_over_l_matches_the_hand_drawing() -> None:
    tree = sympy_to_tree(2 * m * g + 4 * m * v**2 / ell)
    assert tree == HAND_TREE
    # Add (1) + Mul(2, g, m) (4) + Mul(4, m, Pow(l, -1), Pow(v, 2)) (1 + 1 + 1 + 3 + 3 = 9) = 14
    assert tree.size == 14


def test_functions_are_named_nodes_and_constants_are_number_leaves() -> None:
    tree = sympy_to_tree(sp.sin(x) * sp.pi + sp.exp(y))
    labels = {child.label for child in tree.children}
    assert "function_exp" in labels
    product = next(child for child in tree.children if child.name == "Mul")
    assert {c.label for c in product.children} == {"number_pi", "function_sin"}
    assert sympy_to_tree(sp.E).label == "number_E"
    assert sympy_to_tree(-sp.oo).label == "number_-oo"
    assert sympy_to_tree(sp.Rational(1, 2)).label == "number_1/2"


@pytest.mark.parametrize("unsupported", [sp.I, sp.zoo, sp.nan, sp.EulerGamma, sp.Max(x, y), sp.Eq(x, y)])
def test_types_outside_the_published_set_are_rejected(unsupported: sp.Basic) -> None:
    with pytest.raises(UnsupportedExpression):
        sympy_to_tree(unsupported)


def test_updating_one_coefficient_costs_one() -> None:
    answer = sympy_to_tree(2 * m * g + 3 * m * v**2 / ell)
    assert tree_edit_distance(answer, HAND_TREE) == 1.0
    assert score_from_distance(1.0, 14) == pytest.approx(60 - 100 / 14)


def test_identical_trees_are_at_distance_zero_and_score_100() -> None:
    assert tree_edit_distance(HAND_TREE, HAND_TREE) == 0.0
    assert score_from_distance(0.0, 14) == 100.0


def test_score_floor_is_zero() -> None:
    assert score_from_distance(9.0, 14) == 0.0  # 60 - 64.3 < 0


@pytest.mark.parametrize(
    ("size", "expected"),
    [
        (2, 2.0),  # below the threshold: full price
        (5, 5.0),  # at the threshold: min(5, 0.6*0 + 5) = 5
        (6, 5.6),  # min(6, 0.6*1 + 5)
        (10, 8.0),  # min(10, 0.6*5 + 5)
    ],
)
def test_whole_subtree_cost_is_discounted_above_five_nodes(size: int, expected: float) -> None:
    subtree = op("Mul", *[s(f"x{i}") for i in range(size - 1)])
    assert subtree.size == size
    assert subtree_cost(subtree) == pytest.approx(expected)


def test_a_leaf_costs_one_to_insert_or_delete() -> None:
    assert subtree_cost(s("x")) == 1.0


def test_inserting_a_six_node_term_costs_5_6_and_deleting_it_the_same() -> None:
    small = op("Add", s("a"), s("b"))
    term = op("Mul", s("p"), s("q"), s("r"), s("t"), s("u"))  # 6 nodes
    large = op("Add", s("a"), s("b"), term)
    assert tree_edit_distance(small, large) == pytest.approx(5.6)  # node by node it would be 6
    assert tree_edit_distance(large, small) == pytest.approx(5.6)


def test_inserting_a_ten_node_term_costs_8() -> None:
    term = op("Mul", *[s(f"y{i}") for i in range(9)])  # 10 nodes
    assert tree_edit_distance(op("Add", s("a")), op("Add", s("a"), term)) == pytest.approx(8.0)


def test_small_terms_are_charged_per_node() -> None:
    term = op("Pow", s("v"), n("2"))  # 3 nodes: min(3, 0.6*(-2)+5 = 3.8) = 3
    assert tree_edit_distance(op("Add", s("a")), op("Add", s("a"), term)) == 3.0


def test_removing_an_inner_node_keeps_its_children() -> None:
    # The published example after simplify: 2m(gl + 2v^2)/l against 2m(gl + v^2)/l. The answer lacks
    # the Mul(2, v^2) node and its factor 2: delete the leaf, delete the Mul (children move up) = 2.
    reference = sympy_to_tree(2 * m * (g * ell + 2 * v**2) / ell)
    answer = sympy_to_tree(2 * m * (g * ell + v**2) / ell)
    assert reference.size == 15
    assert tree_edit_distance(answer, reference) == 2.0


def test_children_are_ordered() -> None:
    first = node("function", "f", s("a"), s("b"))
    swapped = node("function", "f", s("b"), s("a"))
    assert tree_edit_distance(first, swapped) == 2.0
    assert tree_edit_distance(first, node("function", "g", s("a"), s("b"))) == 1.0


def test_wrapping_in_a_function_costs_one_insert() -> None:
    assert tree_edit_distance(s("a"), node("function", "f", s("a"))) == 1.0


def test_a_deep_tree_does_not_hit_the_recursion_limit() -> None:
    deep = s("x")
    for _ in range(1100):  # deeper than Python's default recursion limit
        deep = node("function", "f", deep)
    assert tree_edit_distance(deep, deep) == 0.0
