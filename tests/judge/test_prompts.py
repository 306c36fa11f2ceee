"""The judge prompts are the paper's appendix-B English text, verbatim, and fill correctly."""

from __future__ import annotations

from pathlib import Path

import pytest

from proctor.agent.errors import UserError
from proctor.agent.judge.prompts import (
    OLYMPIAD_PLACEHOLDERS,
    PROMPTS_DIR,
    RESEARCH_PLACEHOLDERS,
    fill_template,
    load_template,
)
from tests.judge.support import SEED_PAPER


def seed_english_prompts() -> list[list[str]]:
    """The lines of each English original ("英文原文") block of the seed's appendix B."""
    if not SEED_PAPER.exists():
        pytest.fail(f"seed appendix not found at {SEED_PAPER}")
    lines = SEED_PAPER.read_text(encoding="utf-8").split("\n")
    blocks = []
    for index, line in enumerate(lines):
        if line.strip() == "英文原文":
            start = index + 1
            while not lines[start].strip():
                start += 1
            end = start
            while end < len(lines) and lines[end].strip():
                end += 1
            blocks.append(lines[start:end])
    assert len(blocks) == 2, "expected the Olympiad and the Research English prompts"
    return blocks


def test_olympiad_template_is_the_seed_text_line_for_line() -> None:
    olympiad, _ = seed_english_prompts()
    assert load_template("olympiad_judge.txt", OLYMPIAD_PLACEHOLDERS).split("\n") == olympiad


def test_research_template_is_the_seed_text_line_for_line() -> None:
    _, research = seed_english_prompts()
    template = load_template("research_judge.txt", RESEARCH_PLACEHOLDERS)
    assert template.split("\n") == research
    # The paper's typo and its odd line break stay, as published.
    assert "Evaluate the attemped answer against the provided rubric." in template
    assert "be a decimal based on the rubric). ***" in template


def test_filled_olympiad_prompt_keeps_the_seed_sentences_and_fills_placeholders() -> None:
    template = load_template("olympiad_judge.txt", OLYMPIAD_PLACEHOLDERS)
    problem = r"Find $\omega$ for a pendulum {answer} of length $L$."
    filled = fill_template(
        template, {"problem": problem, "reference answer": r"\sqrt{g/L}", "answer": r"$\omega=\sqrt{g/L}$"}
    )
    assert f"The problem: {problem}\n" in filled  # "{answer}" inside the problem is left alone
    assert "The reference answer: \\sqrt{g/L}\n" in filled
    assert "The attempted answer: $\\omega=\\sqrt{g/L}$\n" in filled
    assert "{reference answer}" not in filled
    for sentence in (
        "You are grading an attempted answer to a science olympiad problem.",
        "place rounding of the reference answer (e.g., 6.69 ≈ 6.7), an equivalent name for a "
        "compound/formula,",
        'If the attempted answer is correct, write "VERDICT: CORRECT" in the last line of your response,',
        'with no other text or formatting. If it is incorrect, write "VERDICT: INCORRECT".',
    ):
        assert sentence in filled


def test_filled_research_prompt() -> None:
    template = load_template("research_judge.txt", RESEARCH_PLACEHOLDERS)
    filled = fill_template(template, {"problem": "P?", "rubric": "Points: 10, Item: all", "answer": "A."})
    assert (
        "The problem: P?\n***\nThe rubric: Points: 10, Item: all\n***\nThe attempted answer: A.\n***"
        in filled
    )
    assert filled.endswith("no other text. For example, VERDICT: 2.5 or VERDICT: 8.")
    assert "{" not in filled


def test_template_missing_a_placeholder_is_a_user_error(tmp_path: Path) -> None:
    custom = tmp_path / "judge.txt"
    custom.write_text("Grade {answer} against {problem}.\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"lacks the placeholder\(s\) \{reference answer\}"):
        load_template(custom, OLYMPIAD_PLACEHOLDERS)


def test_missing_template_file_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="cannot read prompt template"):
        load_template(tmp_path / "nope.txt", ())
    assert (PROMPTS_DIR / "olympiad_judge.txt").exists()
