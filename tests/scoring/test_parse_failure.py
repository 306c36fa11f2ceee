"""Which side of an EED pair did not parse, and why (issue 38, item 7).

Invariant: for a ``parse_error`` result, parse_failure names the side that failed (the oracle:
the test knows which side it broke) and shows that side's own text; for every other result it
says nothing. Families: a Python power, an unclosed group, a dangling operator, an unknown
command, on either side; the honest corpus parses and is never called a failure.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from proctor.agent.scoring.eed import eed_score
from proctor.agent.scoring.parse_failure import parse_failure
from proctor.agent.scoring.worker_pool import EEDWorkerPool

BROKEN = ["x**2", r"\frac{1}{", "a+", r"\sqrt{x", "2 m g +", r"x^{2"]
HONEST = ["x^2", r"\frac{1}{2} m v^2", r"2 m g + 4\frac{mv_0^2}{l}", r"\sqrt{x} + y", r"\sin\theta"]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    broken=st.sampled_from(BROKEN),
    honest=st.sampled_from(HONEST),
    side=st.sampled_from(["reference", "answer"]),
)
def test_the_side_that_failed_is_named_with_its_text(
    eed_pool: EEDWorkerPool, broken: str, honest: str, side: str
) -> None:
    reference, answer = (broken, honest) if side == "reference" else (honest, broken)
    assume(len(answer) <= 3 * len(reference))  # else the length gate scores 0 before any parse
    result = eed_score(reference, answer, pool=eed_pool)
    assert result.status == "parse_error", result
    failure = parse_failure(result.detail, reference, answer)
    assert failure is not None and failure.side == side
    assert failure.why.startswith(f"'{broken}' does not parse as LaTeX: ")
    assert "\n" not in failure.why


@pytest.mark.parametrize(("reference", "answer"), list(zip(HONEST, HONEST[1:] + HONEST[:1], strict=True)))
def test_honest_pairs_are_never_called_failures(eed_pool: EEDWorkerPool, reference: str, answer: str) -> None:
    result = eed_score(reference, answer, pool=eed_pool)
    assert result.status != "parse_error", (reference, answer, result)
    assert parse_failure(result.detail, reference, answer) is None


def test_the_parsers_column_and_a_python_habit_are_explained() -> None:
    detail = "answer: LaTeXParsingError: I expected something else here\nx**2\n~~^"
    failure = parse_failure(detail, "x^2", "x**2")
    assert failure is not None
    assert failure.why == (
        "'x**2' does not parse as LaTeX: I expected something else here, at character 3 ('*2'); "
        "LaTeX writes a power as x^{2}"
    )
    # A hedged answer's reading wraps the detail: the same side is found inside.
    wrapped = f"hedged answer, 2 readings scored, the worst kept: 'x**2' ({detail})"
    wrapped_failure = parse_failure(wrapped, "x^2", "x**2")
    assert wrapped_failure is not None and wrapped_failure.side == "answer"
