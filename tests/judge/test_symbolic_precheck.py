"""Symbolic pre-check: plain algebra only, equivalence by sympy (EED's worker), never INCORRECT."""

from __future__ import annotations

import pytest

from proctor.agent.judge.grading import grade_olympiad
from proctor.agent.judge.prompts import OLYMPIAD_PLACEHOLDERS, load_template
from proctor.agent.judge.symbolic import is_plain_algebra, symbolic_pair
from proctor.agent.results.records import Outcome
from tests.judge.support import ListClient

TEMPLATE = load_template("olympiad_judge.txt", OLYMPIAD_PLACEHOLDERS)


@pytest.mark.parametrize(
    ("reference", "answer", "expected"),
    [
        (r"`\(R_{eq}=\frac{R}{3}\)`", "R/3", (r"\frac{R}{3}", "R/3")),
        (r"T = 2\pi\sqrt{L/g}", r"T=2\pi\sqrt{\frac{L}{g}}", (r"2\pi\sqrt{L/g}", r"2\pi\sqrt{\frac{L}{g}}")),
        (r"T = 2\pi\sqrt{L/g}", r"f=2\pi\sqrt{L/g}", None),  # different quantities
        (r"\vec{B}_1 = -\vec{B}_0", r"-\vec{B}_0", None),  # vectors: judge
        (r"\frac{1}{3}", "0.333", None),  # pure numbers: the numeric rule's business
        (r"\frac{a}{b}, \frac{c}{d}", r"\frac{a}{b}", None),  # several answers
        (r"|x|", "x", None),
        ("iron oxide", "oxide iron", None),  # words would read as products of letters
        (r"\frac{mfL}{2}", r"\frac{fLm}{2}", None),
        (r"x \approx 2y", "2y", None),
        (r"E = 3k_BT \text{ J}", "3k_BT", None),
    ],
)
def test_symbolic_pair_is_narrow(reference: str, answer: str, expected: tuple[str, str] | None) -> None:
    assert symbolic_pair(reference, answer) == expected


def test_plain_algebra_whitelist() -> None:
    assert is_plain_algebra(r"\frac{\hbar}{8m^2\omega_0^3}")
    assert not is_plain_algebra(r"\hat{r}")
    assert not is_plain_algebra(r"\int_0^1 x dx")
    assert not is_plain_algebra("12.5")


async def test_equivalent_expression_settles_without_judge() -> None:
    judge = ListClient([])
    grade = await grade_olympiad(
        judge=judge,
        template=TEMPLATE,
        problem="P",
        reference=r"`\( T = T_0(\frac{N}{N_0})^{\frac{1}{5}} \) `",
        answer="long response",
        final_answer=r"T_0 \sqrt[5]{N/N_0}".replace(r"\sqrt[5]{N/N_0}", r"(N/N_0)^{1/5}"),
    )
    assert grade.outcome is Outcome.CORRECT and judge.requests == []
    assert grade.judge.decided_by == "precheck" and grade.judge.precheck == "settled correct by symbolic"


async def test_inequivalent_expression_goes_to_the_judge() -> None:
    judge = ListClient(["VERDICT: INCORRECT"])
    grade = await grade_olympiad(
        judge=judge,
        template=TEMPLATE,
        problem="P",
        reference=r"\frac{m f L_x L_y^2}{2 M R^2}",
        answer="resp",
        final_answer=r"\frac{m f L_y L_x^{2}}{2 M R^{2}}",
    )
    assert len(judge.requests) == 1 and grade.outcome is Outcome.INCORRECT
    assert grade.judge.precheck is not None and "symbolic check: ok" in grade.judge.precheck


async def test_symbolic_can_be_switched_off() -> None:
    judge = ListClient(["VERDICT: CORRECT"])
    grade = await grade_olympiad(
        judge=judge,
        template=TEMPLATE,
        problem="P",
        reference=r"\frac{R}{3}",
        answer="resp",
        final_answer="R/3",
        symbolic=False,
    )
    assert len(judge.requests) == 1 and grade.judge.decided_by == "judge"


async def test_a_broken_symbolic_check_defers_to_the_judge(monkeypatch: pytest.MonkeyPatch) -> None:
    import proctor.agent.scoring.eed as eed

    async def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("worker pool gone")

    monkeypatch.setattr(eed, "eed_score_async", broken)
    judge = ListClient(["VERDICT: CORRECT"])
    grade = await grade_olympiad(
        judge=judge, template=TEMPLATE, problem="P", reference=r"\frac{R}{3}", answer="r", final_answer="R/3"
    )
    assert grade.outcome is Outcome.CORRECT and grade.judge.decided_by == "judge"
    assert (
        grade.judge.precheck is not None and "symbolic check failed: worker pool gone" in grade.judge.precheck
    )
