"""extract_boxed: the last \\boxed{...} with balanced braces, for the PHYBench track."""

from __future__ import annotations

import pytest

from proctor.agent.scoring.eed import extract_boxed


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"so \boxed{x^2}", "x^2"),
        (r"first \boxed{a} then \boxed{\frac{m v^2}{2}}.", r"\frac{m v^2}{2}"),
        (r"\boxed{\sqrt{\frac{2gh}{1+\frac{I}{mr^2}}}}", r"\sqrt{\frac{2gh}{1+\frac{I}{mr^2}}}"),
        (r"\boxed {a+b}", "a+b"),
        (r"\boxed{\{a\}}", r"\{a\}"),
        ("no box here", None),
        (r"\boxed{unclosed", None),
        (r"\boxed{a} and \boxedfoo", "a"),
        ("", None),
    ],
)
def test_extract_boxed(text: str, expected: str | None) -> None:
    assert extract_boxed(text) == expected
