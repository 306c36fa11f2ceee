"""The static submission rules: parses, answer() with no parameters, no comments."""

from __future__ import annotations

import sys

import pytest

from proctor.agent.tracks.frontiermath.checks import check_submission_code


def test_clean_submission_passes() -> None:
    code = "import sympy\n\ndef helper(n):\n    return n * 2\n\ndef answer():\n    return helper(21)\n"
    assert check_submission_code(code) == []


def test_hash_inside_a_string_is_not_a_comment() -> None:
    assert check_submission_code('def answer():\n    return "#1 # not a comment"\n') == []


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("def answer():\n    return 1  # the answer\n", "comments (line 2)"),
        ("# header\ndef answer():\n    # body\n    return 1\n", "comments (lines 1, 3)"),
        ("def answer(n):\n    return n\n", "must take no arguments, but it takes: n"),
        ("def answer(*args, **kw):\n    return 1\n", "takes: *args, **kw"),
        ("def answer(*, k=1):\n    return k\n", "takes: k"),
        ("def solve():\n    return 1\n", "does not define a top-level function named 'answer'"),
        ("class A:\n    def answer(self):\n        return 1\n", "does not define a top-level function"),
        ("async def answer():\n    return 1\n", "not 'async def'"),
        ("def answer(:\n    return 1\n", "syntax error"),
    ],
)
def test_rule_violations_are_reported(code: str, expected: str) -> None:
    problems = check_submission_code(code)
    assert problems and expected in " ".join(problems)


def test_several_problems_are_all_reported() -> None:
    problems = check_submission_code("def answer(x):\n    return x  # no\n")
    assert len(problems) == 2


@pytest.mark.parametrize(
    "expression",
    ["-" * 3000 + "42", "1+" * 3000 + "1", "x." * 3000 + "y", "not " * 3000 + "True", "~" * 5000 + "1"],
)
def test_code_nested_past_the_parser_is_a_problem_not_a_crash(expression: str) -> None:
    """3 KB of unary minus makes Python's parser raise RecursionError. Raised out of the checks it
    ended the sample as a harness error, which is counted apart and re-run: a way to abstain."""
    problems = check_submission_code(f"def answer():\n    return {expression}\n")
    assert problems == ["the code cannot be parsed: it is nested too deeply for Python's parser"]


@pytest.mark.parametrize("recursion_limit", [1000, 1100, 20_000])
def test_the_depth_verdict_does_not_depend_on_the_recursion_limit(recursion_limit: int) -> None:
    """Whether 3,000 nested "not"s parsed depended on the process's recursion limit, which other
    code (hypothesis) raises: the same submission was refused in one run and ran in another."""
    deep = "def answer():\n    return " + "not " * 3000 + "True\n"
    long_sum = "def answer():\n    return " + "1+" * 1500 + "1\n"  # 1,500 levels: Python runs it
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(recursion_limit)
    try:
        deep_problems = check_submission_code(deep)
        long_sum_problems = check_submission_code(long_sum)
    finally:
        sys.setrecursionlimit(previous)
    assert deep_problems == ["the code cannot be parsed: it is nested too deeply for Python's parser"]
    assert long_sum_problems == []
    namespace: dict[str, object] = {}
    exec(compile(long_sum, "<answer>", "exec"), namespace)  # what the sandbox does with it
