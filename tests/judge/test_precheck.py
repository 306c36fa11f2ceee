"""The deterministic pre-check settles only sure CORRECT cases; everything else goes to the judge."""

from __future__ import annotations

import pytest

from proctor.agent.judge.precheck import normalize_answer, precheck
from proctor.agent.tracks.olympiad import OlympiadTrack


@pytest.mark.parametrize(
    ("reference", "answer", "rule"),
    [
        ("6.7", "6.69", "numeric"),  # the prompt's own example
        ("5.4", "5.35", "numeric"),
        ("0.0456M", "0.046 M", "numeric"),
        ("7", "7.0", "numeric"),
        (r"\\(E = -8.6\\times 10^{39} \\text{ J}\\)", "-8.6e39 J", "numeric"),
        (r"\\(r = 19\\)", "19", "exact"),  # escaped twice, with a left-hand side
        ("`\\( T = \\frac{2\\pi}{\\omega} \\) `", r"$T=\dfrac{2\pi}{\omega}$", "exact"),
        (r"`\(R_{eq}=\frac{R}{3}\)`", r"\frac{R}{3}", "exact"),
        (r"\-8", "-8", "exact"),
        ("Sodium bismuthate (NaBiO3)", "Sodium bismuthate (NaBiO3).", "exact"),
        ("`\\( 2.31 \\times 10^6 K\\)`", r"2.31 \times 10^{6} K", "exact"),
    ],
)
def test_settles_clear_matches(reference: str, answer: str, rule: str) -> None:
    result = precheck(reference, answer)
    assert result.settled_correct, result
    assert result.rule == rule


@pytest.mark.parametrize(
    ("reference", "answer"),
    [
        ("6.7", "6.8"),
        ("6.7", "6.75"),  # rounds to 6.8: not sure, let the judge decide
        ("0.0456M", "0.04 M"),  # equal at one decimal place, not at the leading digit
        ("0.2", "-0.2"),
        ("7", "7.04"),  # an integer reference needs the integer
        ("35", "35.4"),
        ("1.06 mg", "1.06 g"),  # other unit
        ("7.59 micrograms.", "7.59 μg"),  # maybe equivalent, but only the judge may say so
        (r"\frac{R}{3}", r"\frac{R}{2}"),
        (r"T=\frac{2\pi}{\omega}", r"f=\frac{2\pi}{\omega}"),  # different quantities
        ("Sodium nitrate", "Sodium nitrite"),
        ("0.0", "0.01"),
    ],
)
def test_defers_everything_not_sure(reference: str, answer: str) -> None:
    assert not precheck(reference, answer).settled_correct


def test_no_answer_defers() -> None:
    assert not precheck("6.7", None).settled_correct
    assert not precheck("6.7", "   ").settled_correct


def test_normalisation() -> None:
    assert normalize_answer("`\\\\( \\\\frac{a}{b} \\\\)`") == r"\frac{a}{b}"
    assert normalize_answer(r"\left( x \right)^{2}") == "(x)^2"
    assert normalize_answer(r"\cos x") == r"\cos x"  # a meaningful space survives
    assert normalize_answer("&lt;IUPAC&gt;Furan&lt;/IUPAC&gt;") == "<IUPAC>Furan</IUPAC>"
    assert normalize_answer(r"\omega\_{\rm sum}") == r"\omega_{\rm sum}"


def test_gold_references_match_themselves_and_not_each_other() -> None:
    """Over the real gold set: each reference settles against itself, and distinct references
    settle against each other only where the prompt's rounding rule says so."""
    from tests.judge.test_science_tasks import gold_file

    references = [t.answer for t in OlympiadTrack().load_tasks(gold_file("olympiad"))]
    assert all(precheck(ref, ref).settled_correct for ref in references)
    crossed = {
        (ref, other)
        for ref in references
        for other in references
        if ref != other and precheck(ref, other).settled_correct
    }
    assert crossed == {("6.98", "7")}  # 7 = 7.0, which is 6.98 rounded to one decimal place
