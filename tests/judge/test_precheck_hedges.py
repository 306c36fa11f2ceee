"""Hedged answers never settle CORRECT in the pre-checks; odd or huge text defers, never crashes.

The pre-check settles only whitelisted shapes (agent/judge/precheck.py). These tests attack it
with hedges around the right value: if any of them settled, a model could collect CORRECT by
listing candidates.
"""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from proctor.agent.judge.grading import grade_olympiad
from proctor.agent.judge.precheck import normalize_answer, parse_number, precheck, split_assignment
from proctor.agent.judge.prompts import OLYMPIAD_PLACEHOLDERS, load_template
from proctor.agent.judge.symbolic import is_plain_algebra, symbolic_pair
from proctor.agent.results.records import Outcome
from proctor.agent.text.answer_shape import boxed_contents, is_bare_name
from proctor.agent.tracks.science_common import final_answer_of
from tests.judge.support import ListClient

TEMPLATE = load_template("olympiad_judge.txt", OLYMPIAD_PLACEHOLDERS)
PROPERTY = settings(
    derandomize=True, deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow]
)

# (reference, hedged answer): each names the right value among other candidates.
ISSUE_HEDGES = [
    ("5", "3 or 4 or 6 = 5"),
    ("9.8", r"g \approx 3.2 (or maybe 11.0) = 9.8"),
]
MORE_HEDGES = [
    ("5", "5 or 6"),
    ("5", "6 or 5"),
    ("5", "5 and 6"),
    ("5", "either 5 or 6"),
    ("5", r"5 \text{ or } 6"),
    ("5", r"\pm 5"),
    ("5", r"5 \pm 1"),
    ("5", r"5 \mp 1"),
    ("5", "±5"),
    ("5", "5 ± 1"),
    ("5", "∓5"),
    ("5", "5, 6"),
    ("5", "5; 6"),
    ("5", "(5, 6)"),
    ("5", r"\{5, 6\}"),
    ("5", "[4, 5]"),
    ("5", "x = 5, 6"),
    ("5", "x = 5 = 6"),
    ("5", "6 = 5"),
    ("5", "x + 1 = 5"),
    ("5", "x = 6 = 5"),
    ("5", "3 to 5"),
    ("5", "5-6"),
    ("5", "4-5"),
    ("5", "between 4 and 5"),
    ("5", r"4 \le x \le 5"),
    ("5", r"x \le 5"),
    ("5", "x <= 5"),
    ("5", "x >= 5"),
    ("5", "x < 5"),
    ("5", "approximately 5 or 6"),
    ("5", r"\approx 5"),
    ("5", "~5"),
    ("5", "maybe 5"),
    ("5", "5?"),
    ("5", "not 5"),
    ("5", "5 unless x > 1"),
    ("5", "5 (or 6)"),
    ("5", "5 (maybe)"),
    ("5", "5..."),
    ("5", r"\boxed{5}\boxed{6}"),
    ("5", "5 or"),
    ("6.7", "6.7 or 6.8"),
    ("6.7", "6.69, 7.5"),
    ("6.7", r"6.7 \pm 0.1"),
    ("0.0456M", "0.046 M or 0.05 M"),
    ("1.06 mg", "1.06 mg or 2 mg"),
    ("r = 19", "r = 19 or 20"),
    ("r = 19", "r = 18 = 19"),
    (r"T = \frac{2\pi}{\omega}", r"T = \frac{2\pi}{\omega} \text{ or } \frac{\pi}{\omega}"),
    (r"\frac{R}{3}", r"R_{eq} = \frac{R}{3} = \frac{R}{2}"),
]
# Odd numbers and sizes: all must defer, quickly, without raising.
ODD = [
    "1" * 3000,
    "1" * 3000 + ".5",
    "0." + "0" * 3000 + "1",
    "6.7" + "0" * 3000,
    "1e999999",
    "1e-999999",
    "6.7e0000",
    "NaN",
    "nan",
    "inf",
    "-inf",
    "Infinity",
    "0x1F",
    "1_000",
    "١٢٣",
    "٦.٧",
    "６.７",
    "6.7\u200b",
    "{" * 10_000 + "6.7" + "}" * 10_000,
    r"\frac{" * 5_000 + "6.7" + "}" * 5_000,
    "6.7" + " " * 100_000,
    "\ud800",
    "6.7\x00",
    "x" * 1_000_000,
]


@pytest.mark.parametrize(("reference", "answer"), ISSUE_HEDGES + MORE_HEDGES)
def test_a_hedge_never_settles(reference: str, answer: str) -> None:
    assert not precheck(reference, answer).settled_correct
    assert symbolic_pair(reference, answer) is None
    assert not precheck(reference, final_answer_of(f"Work.\nFINAL ANSWER: {answer}")).settled_correct


@pytest.mark.parametrize("answer", ODD, ids=lambda text: repr(text[:12]) + f"..{len(text)}")
@pytest.mark.parametrize("reference", ["6.7", "123", "1e999", "6.7 m"])
def test_odd_numbers_and_sizes_defer_fast(reference: str, answer: str) -> None:
    started = time.monotonic()
    assert not precheck(reference, answer).settled_correct
    assert symbolic_pair(reference, answer) is None
    assert time.monotonic() - started < 2.0  # linear work on at most a few MB: milliseconds


def test_the_olympiad_3000_digit_crash_is_gone() -> None:
    """Issue 10: a 3,000-digit FINAL ANSWER against a decimal reference raised InvalidOperation."""
    assert not precheck("6.7", "7" * 3000).settled_correct
    assert not precheck("2.31 \\times 10^6 K", "2" * 3000 + " K").settled_correct


def test_committed_shapes_still_settle() -> None:
    assert precheck("5", "x = 5").rule == "exact"
    assert precheck("r = 19", "19").settled_correct
    assert precheck(r"R_{eq}=\frac{R}{3}", r"R_{eq} = \frac{R}{3}").settled_correct
    assert precheck(r"\Delta S = 4", r"\Delta S = 4.0").rule == "numeric"
    assert precheck(r"y(x) = 2", "y(x) = 2").settled_correct
    assert precheck("1e999", "1.0e999").rule == "numeric"
    assert precheck("6.7", "-6.7").settled_correct is False


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("T", True),
        (r"R_{eq}", True),
        (r"\omega_{\rm sum}", True),
        (r"\Delta S", True),
        (r"\langle V\rangle", True),
        (r"\vec{B}", True),
        ("y(x)", True),
        ("v_0'", True),
        ("3 or 4 or 6", False),
        (r"g \approx 3.2 (or maybe 11.0)", False),
        ("x+y", False),
        ("2x", False),
        ("x^2", False),
        ("5", False),
        ("", False),
        ("ab", False),
        ("x_{5 or 6}", False),
        (r"x_{\text{max}}", True),
    ],
)
def test_bare_names(text: str, expected: bool) -> None:
    assert is_bare_name(text) is expected
    if expected:
        assert split_assignment(normalize_answer(text + " = 5")) == (normalize_answer(text), "5")


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        (r"so \boxed{5}", "5"),
        (r"\boxed{5} and again \boxed{5}", "5"),
        (r"\boxed{3} or \boxed{5}", None),  # two candidates: no single final answer
        ("FINAL ANSWER: 6\nno wait\nFINAL ANSWER: 5", None),
        ("FINAL ANSWER: 5\nFINAL ANSWER: 5", "5"),
        ("FINAL ANSWER:\n" + r"\boxed{5}", r"\boxed{5}"),
        ("FINAL ANSWER: 5", "5"),
        ("So " + r"\boxed{6}" + ".\nFINAL ANSWER: 5", None),  # a boxed 6 and a marked 5
        ("So " + r"\boxed{5}" + ".\nFINAL ANSWER: 5", "5"),
        ("So " + r"\boxed{5}" + ".\nFINAL ANSWER: " + r"\boxed{5}", r"\boxed{5}"),
        ("no answer", None),
        # A marker's answer is its whole section, not the rest of its line: these answered 5 on
        # the line after one marker and 6 after the other, and the pre-check settled "6".
        ("FINAL ANSWER:\n5\n\nFINAL ANSWER:\n6", None),
        ("**FINAL ANSWER:**\n5\n**FINAL ANSWER:**\n6", None),
        ("FINAL ANSWER: **\n5\nFINAL ANSWER: **\n6", None),
        ("FINAL ANSWER:\n6\n\nFINAL ANSWER:\n6", "6"),
        # A marker only "\n" starts is invisible to the strict search, but a reader sees it: a
        # second marker after another line break, or spelled another way, is a second candidate.
        *((f"FINAL ANSWER: 5\n...{sep}FINAL ANSWER: 6", None) for sep in "\u2028\u2029\x85\x1c\x1e\v\f\r"),
        ("\uff26\uff49\uff4e\uff41\uff4c \uff21\uff4e\uff53\uff57\uff45\uff52\uff1a6\nFINAL ANSWER: 5", None),
        ("**Final Answer\uff1a** 6\nFINAL ANSWER: 5", None),
        ("FIN\u200bAL ANSWER: 6\nFINAL ANSWER: 5", None),
        ("FINAL \u0410NSWER: 6\nFINAL ANSWER: 5", None),  # Cyrillic A
        ("**Final Answer:** 5", "5"),
        ("The final answer: 6 is wrong.\nFINAL ANSWER: 5", "5"),  # prose, not a marker line
        # Boxes LaTeX draws but the braced-group scan does not read: each hid a second candidate.
        (r"\boxed{5} or \boxed 6", None),
        (r"\boxed{5} or \boxed6", None),
        (r"\boxed{5} or \fbox{6}", None),
        ("FINAL ANSWER: 5\n" + r"(or \framebox{6})", None),
        # The scan reads at most 64 boxes: a 65th, different one was never seen.
        (r"\boxed{5}" * 64 + r" or \boxed{6}", None),
        (r"\boxed{5}" * 63, "5"),
    ],
)
def test_final_answer_commits_to_one_value(response: str, expected: str | None) -> None:
    assert final_answer_of(response) == expected


@pytest.mark.parametrize("filler", ["\n", " ", "*", " *", "\t* ", "FINAL ANSWER", "FINAL ANSWER:\n"])
def test_final_answer_search_is_linear(filler: str) -> None:
    # "\s*\**\s*" made the marker regex cubic: 2,000 newlines took 34 s.
    started = time.monotonic()
    final_answer_of(filler * 200_000)
    assert time.monotonic() - started < 5.0


def test_boxed_contents_are_outermost_and_bounded() -> None:
    assert boxed_contents(r"\boxed{a} x \boxed{\boxed{b}} \boxed{c") == ["a", r"\boxed{b}"]
    assert boxed_contents(r"\boxed{\}}") == [r"\}"]
    assert len(boxed_contents(r"\boxed{a}" * 1000, limit=5)) == 5


async def test_a_hedged_final_answer_goes_to_the_judge() -> None:
    judge = ListClient(["VERDICT: INCORRECT"])
    grade = await grade_olympiad(
        judge=judge,
        template=TEMPLATE,
        problem="P",
        reference="5",
        answer="FINAL ANSWER: 3 or 4 or 6 = 5",
        final_answer="3 or 4 or 6 = 5",
    )
    assert len(judge.requests) == 1 and grade.outcome is Outcome.INCORRECT
    assert grade.judge.decided_by == "judge"


@pytest.mark.parametrize(
    "final_answer",
    [
        r"\frac{R}{3} + \frac{0}{0}",
        r"\frac{R}{3} + 0 \cdot \frac{1}{0}",
        r"\frac{R}{3} \cdot \frac{R-R}{R-R}",
    ],
)
async def test_an_undefined_expression_is_not_symbolically_correct(final_answer: str) -> None:
    # Plain algebra, so it reaches sympy; EED's fixed mode must not call it equivalent.
    assert symbolic_pair(r"\frac{R}{3}", final_answer) is not None
    judge = ListClient(["VERDICT: INCORRECT"])
    grade = await grade_olympiad(
        judge=judge,
        template=TEMPLATE,
        problem="P",
        reference=r"\frac{R}{3}",
        answer="r",
        final_answer=final_answer,
    )
    assert grade.judge.decided_by == "judge" and len(judge.requests) == 1


async def test_a_broken_precheck_defers_to_the_judge(monkeypatch: pytest.MonkeyPatch) -> None:
    import proctor.agent.judge.grading as grading

    def broken(reference: str, answer: str | None) -> None:
        raise ArithmeticError("boom")

    monkeypatch.setattr(grading, "precheck", broken)
    judge = ListClient(["VERDICT: CORRECT"])
    grade = await grade_olympiad(
        judge=judge, template=TEMPLATE, problem="P", reference="5", answer="r", final_answer="5"
    )
    assert grade.judge.decided_by == "judge" and grade.outcome is Outcome.CORRECT
    assert (
        grade.judge.precheck is not None and "pre-check failed: ArithmeticError: boom" in grade.judge.precheck
    )


# --- properties -------------------------------------------------------------------------------------

HEDGE_TEMPLATES = [
    "{a} or {b}",
    "{b} or {a}",
    "either {b} or {a}",
    "{a} and {b}",
    r"{a} \text{{ or }} {b}",
    "{a}, {b}",
    "{b}, {a}",
    "{a}; {b}",
    "({a}, {b})",
    "[{b}, {a}]",
    r"\{{{a}, {b}\}}",
    r"{a} \pm {b}",
    r"\pm {a}",
    r"{a} \mp {b}",
    "±{a}",
    "{a} ± {b}",
    "{b} = {a}",
    "x = {b} = {a}",
    "{b} or x = {a}",
    "x = {a} or {b}",
    "x = {a}, {b}",
    "{a} to {b}",
    "{b}-{a}",
    "between {b} and {a}",
    r"{b} \le x \le {a}",
    r"x \le {a}",
    "x < {a}",
    "x >= {a}",
    "approximately {a} or {b}",
    r"\approx {a}",
    "~{a}",
    "maybe {a}",
    "{a}?",
    "{a} (or {b})",
    "{a} (maybe {b})",
    "{a}, {b} or {a}",
    "{a} unless {b}",
    r"\boxed{{{b}}} \boxed{{{a}}}",
]


def _number_text(value: float, style: int) -> str:
    return [f"{value:g}", f"{value:.3f}", f"{value:.1e}", f"{value:.2f}"][style]


@PROPERTY
@given(
    reference=st.floats(min_value=-1e6, max_value=1e6, allow_nan=False).filter(lambda v: abs(v) > 1e-3),
    offset=st.floats(min_value=1.0, max_value=1e3),
    template=st.sampled_from(HEDGE_TEMPLATES),
    style=st.integers(0, 3),
    unit=st.sampled_from(["", " m", r" \text{ J}", " K"]),
)
def test_hedged_numbers_never_settle(
    reference: float, offset: float, template: str, style: int, unit: str
) -> None:
    ref_text = _number_text(reference, style) + unit
    right = ref_text  # the reference's own spelling: the strongest bait
    wrong = _number_text(reference + offset * (1 if reference < 0 else -1), style) + unit
    assume(wrong != right)  # "1.0e+02" twice is not a hedge
    answer = template.format(a=right, b=wrong)
    for candidate in (answer, final_answer_of(answer), final_answer_of(f"FINAL ANSWER: {answer}")):
        assert not precheck(ref_text, candidate).settled_correct, (ref_text, candidate)


EXPRESSIONS = [
    r"\frac{R}{3}",
    r"2\pi\sqrt{L/g}",
    "m g h",
    r"\frac{1}{2} m v^2",
    r"\sqrt{\frac{3 g}{L}}",
    "k_BT",
]


@PROPERTY
@given(
    reference=st.sampled_from(EXPRESSIONS),
    wrong=st.sampled_from([r"\frac{R}{2}", "2 m g h", r"\sqrt{g}", "2q", r"\frac{1}{q}"]),  # no bare name
    # "{b}-{a}" is a range between numbers but a difference between expressions: not a hedge there.
    template=st.sampled_from([t for t in HEDGE_TEMPLATES if t != "{b}-{a}"]),
    named=st.booleans(),
)
def test_hedged_expressions_never_reach_sympy(reference: str, wrong: str, template: str, named: bool) -> None:
    answer = template.format(a=reference, b=wrong)
    ref_text = f"X = {reference}" if named else reference
    assert symbolic_pair(ref_text, answer) is None, answer
    assert not precheck(ref_text, answer).settled_correct, answer


LATEX_PIECES = st.sampled_from(
    ["{", "}", "\\", "\\frac", "\\boxed{", "=", "or", " ", "5", "6.7", "e", "E999", ".", "-", "+", "^", "_",
     "\\pm", "\\times 10^{", "\\text{", "FINAL ANSWER:", "\n", "&lt;", "$", "\\(", "٣", "１", "\ud800",
     "\x00"]
)  # fmt: skip


@PROPERTY
@given(
    reference=st.text(st.characters(codec=None, exclude_categories=[]), max_size=40)
    | st.lists(LATEX_PIECES, max_size=30).map("".join),
    answer=st.text(st.characters(codec=None, exclude_categories=[]), max_size=200)
    | st.lists(LATEX_PIECES, max_size=200).map("".join),
)
def test_random_text_never_raises(reference: str, answer: str) -> None:
    for candidate in (answer, final_answer_of(answer)):
        result = precheck(reference, candidate)
        assert isinstance(result.settled_correct, bool)
        pair = symbolic_pair(reference, candidate)
        assert pair is None or all(is_plain_algebra(side) for side in pair)
    normalize_answer(answer)
    parse_number(answer)
