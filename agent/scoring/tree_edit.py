"""Extended Zhang–Shasha tree edit distance, as PHYBench's EED defines it.

Plain Zhang–Shasha allows three edits per node: insert, delete and relabel (update). The
extension adds two more: deleting or inserting a whole subtree in one step, at a discounted
cost, so that a missing term of many nodes is not charged node by node:

    subtree_cost(s) = min(s, 0.6 * (s - 5) + 5)    for a subtree of s > 1 nodes
                    = 1                             for a leaf

(the discount only bites for s > 5). Every other edit costs 1; an update between equal labels
costs 0. Keyroots and forest distances follow the original algorithm; the forest recurrence gains
the two whole-subtree transitions.
"""

from __future__ import annotations

from dataclasses import dataclass

from proctor.agent.scoring.expr_tree import TreeNode

DISCOUNT_SLOPE = 0.6
DISCOUNT_THRESHOLD = 5  # the published "bar_size": subtrees up to this size pay full price


def subtree_cost(subtree: TreeNode) -> float:
    """Cost of inserting or deleting ``subtree`` in one edit."""
    if not subtree.children:
        return 1.0
    size = subtree.size
    return min(size, DISCOUNT_SLOPE * (size - DISCOUNT_THRESHOLD) + DISCOUNT_THRESHOLD)


def update_cost(first: TreeNode, second: TreeNode) -> float:
    return 0.0 if first.label == second.label else 1.0


@dataclass
class _PostOrder:
    """Nodes in post-order with each node's leftmost leaf descendant and the keyroots."""

    nodes: list[TreeNode]
    leftmost: list[int]
    keyroots: list[int]

    @classmethod
    def of(cls, root: TreeNode) -> _PostOrder:
        nodes: list[TreeNode] = []
        leftmost: list[int] = []
        # Iterative walk: deep trees (a tower of powers) must not hit Python's recursion limit.
        stack: list[tuple[TreeNode, int]] = [(root, 0)]
        first_leaf_stack: list[int] = []
        while stack:
            current, child_index = stack.pop()
            if child_index == 0:
                first_leaf_stack.append(len(nodes))  # the next post-order index is its leftmost leaf
            if child_index < len(current.children):
                stack.append((current, child_index + 1))
                stack.append((current.children[child_index], 0))
            else:
                leftmost.append(first_leaf_stack.pop())
                nodes.append(current)
        last_with_leftmost: dict[int, int] = {}
        for index, leaf_index in enumerate(leftmost):
            last_with_leftmost[leaf_index] = index
        return cls(nodes, leftmost, sorted(last_with_leftmost.values()))


def tree_edit_distance(first: TreeNode, second: TreeNode) -> float:
    """Minimum cost of editing ``first`` into ``second`` (symmetric: costs are symmetric)."""
    a = _PostOrder.of(first)
    b = _PostOrder.of(second)
    size_a, size_b = len(a.nodes), len(b.nodes)
    tree_distance = [[0.0] * size_b for _ in range(size_a)]
    single_a = [1.0] * size_a
    whole_a = [subtree_cost(n) for n in a.nodes]
    whole_b = [subtree_cost(n) for n in b.nodes]
    # One forest table reused across keyroot pairs: each pass writes every cell it later reads.
    forest = [[0.0] * (size_b + 1) for _ in range(size_a + 1)]
    a_left, b_left = a.leftmost, b.leftmost
    a_labels = [n.label for n in a.nodes]
    b_labels = [n.label for n in b.nodes]

    for x in a.keyroots:
        x_left = a_left[x]
        for y in b.keyroots:
            y_left = b_left[y]
            forest[x_left][y_left] = 0.0
            for i in range(x_left, x + 1):
                forest[i + 1][y_left] = forest[a_left[i]][y_left] + whole_a[i]
            row0 = forest[x_left]
            for j in range(y_left, y + 1):
                row0[j + 1] = row0[b_left[j]] + whole_b[j]
            for i in range(x_left, x + 1):
                i_left = a_left[i]
                row_prev, row, row_left = forest[i], forest[i + 1], forest[i_left]
                remove_one, remove_all, label_i = single_a[i], whole_a[i], a_labels[i]
                same_left_a = i_left == x_left
                for j in range(y_left, y + 1):
                    j_left = b_left[j]
                    best = min(
                        row_prev[j + 1] + remove_one,
                        row[j] + 1.0,
                        row_left[j + 1] + remove_all,
                        row[j_left] + whole_b[j],
                    )
                    if same_left_a and j_left == y_left:
                        relabel = 0.0 if label_i == b_labels[j] else 1.0
                        value = min(best, row_prev[j] + relabel)
                        tree_distance[i][j] = value
                        row[j + 1] = value
                    else:
                        row[j + 1] = min(best, row_left[j_left] + tree_distance[i][j])
    return tree_distance[size_a - 1][size_b - 1]
