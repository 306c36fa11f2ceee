"""Verdict parsing: the last non-empty line, held to the form the prompts ask for."""

from __future__ import annotations

import pytest

from proctor.agent.judge.verdict import VerdictParseError, parse_binary_verdict, parse_points_verdict


@pytest.mark.parametrize(
    ("reply", "correct"),
    [
        ("The answers match.\nVERDICT: CORRECT", True),
        ("Not equivalent.\nVERDICT: INCORRECT", False),
        ("reasoning\n\n   VERDICT: CORRECT   \n\n\n", True),  # surrounding whitespace is stripped
        ("x\r\nVERDICT: INCORRECT\r\n", False),  # \r\n is a line break
        # Markup and a full stop are the judge's style, not another verdict (issue 40).
        ("**VERDICT: CORRECT**", True),
        ("VERDICT: CORRECT.", True),
        ("VERDICT:CORRECT", True),
    ],
)
def test_binary_verdict_from_last_line(reply: str, correct: bool) -> None:
    assert parse_binary_verdict(reply).correct is correct


@pytest.mark.parametrize(
    "reply",
    [
        "",
        None,
        "   \n\n",
        "VERDICT: correct",
        "Verdict: CORRECT",
        # Quoted, block-quoted or struck out: someone else's words, or withdrawn.
        "> VERDICT: CORRECT",
        '"VERDICT: CORRECT"',
        "~~VERDICT: CORRECT~~",
        "VERDICT: CORRECT..",
        "VERDICT: CORRECT!",
        "VERDICT: CORRECT\nI am confident in this.",
        "VERDICT: CORRECT\nVERDICT: INCORRECT\nsee above",
        # Two verdict lines are ambiguous, whichever comes last (tests/judge/test_verdict_lines.py).
        "VERDICT: CORRECT\nOn reflection, no.\nVERDICT: INCORRECT",
        "VERDICT: PARTIALLY CORRECT",
        "The answer is correct.",
    ],
)
def test_binary_verdict_rejects_anything_else(reply: str | None) -> None:
    with pytest.raises(VerdictParseError):
        parse_binary_verdict(reply)


@pytest.mark.parametrize(
    ("reply", "points"),
    [
        ("item 1: 2 pts\nVERDICT: 8", 8.0),
        ("VERDICT: 2.5", 2.5),
        ("VERDICT: 0", 0.0),
        ("VERDICT: 10", 10.0),
        ("VERDICT: 10.0\n", 10.0),
        ("VERDICT: .5", 0.5),
    ],
)
def test_points_verdict(reply: str, points: float) -> None:
    assert parse_points_verdict(reply).points == points


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ("VERDICT: 11", "outside"),
        ("VERDICT: -1", "outside"),
        ("VERDICT: 10.01", "outside"),
        ("VERDICT: 7/10", "not of the form"),
        ("VERDICT: seven", "not of the form"),
        ("VERDICT: 7 points", "not of the form"),
        ("VERDICT: 1e1", "not of the form"),
        ("VERDICT: nan", "not of the form"),
        # Digits of other scripts are look-alikes that float() would read as numbers.
        ("VERDICT: \uff11\uff10", "not of the form"),
        ("VERDICT: \u0661\u0660", "not of the form"),
        ("VERDICT: 7.\u0665", "not of the form"),
        ("VERDICT: 7\nThat is my grade.", "not of the form"),
        ("VERDICT: 3\nVERDICT: 7", "more than one verdict line"),
        ("", "empty"),
    ],
)
def test_points_verdict_rejects(reply: str, why: str) -> None:
    with pytest.raises(VerdictParseError, match=why):
        parse_points_verdict(reply)
