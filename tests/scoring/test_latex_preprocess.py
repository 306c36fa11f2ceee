"""LaTeX preprocessing: the published steps in strict mode (defects included) and the fixed mode."""

from __future__ import annotations

import pytest

from proctor.agent.scoring.latex_preprocess import PreprocessError, keep_after_last_relation, preprocess


@pytest.mark.parametrize(
    ("latex", "expected"),
    [
        (r"\dfrac{a}{b}", r"\frac{a}{b}"),
        (r"\tfrac{a}{b}", r"\frac{a}{b}"),
        (r"\boxed{E = mc^2}", "mc^2"),
        (r"{x+1}", "x+1"),
        (r"\frac12 m", r"\frac{1}{2} m"),
        (r"\frac\alpha2", r"\frac{\alpha}{2}"),
        (r"x^\frac{1}{2}", r"x^{\frac{1}{2}}"),
        (r"\vec v", r"\vec{v}"),
        (r"\vec{a_{b}}", r"\vec{a}_{b}"),
        (r"\mathrm{m} g", "m g"),
        (r"a \quad b", "a"),
        (r"x.", "x"),
        (r"\pm x", "+ x"),
        (r"a\,b", "ab"),
        (r"$x$", "x"),
        (r"\{a\}", "(a)"),
        (r"m_e", r"m_{e}"),
        (r"E_k", r"\bar{E}_k"),
    ],
)
def test_published_normalisations_apply_in_both_modes(latex: str, expected: str) -> None:
    assert preprocess(latex, "strict") == expected
    assert preprocess(latex, "fixed") == expected


@pytest.mark.parametrize(
    ("latex", "strict", "fixed"),
    [
        # Slicing one character past the operator's first character.
        (r"v \approx 3.2", "approx 3.2", "3.2"),
        (r"T \geq 5", "geq 5", "5"),
        (r"F \le 3", "le 3", "3"),
        # A later operator in the published list wins, wherever it stands.
        (r"a = b \approx c", "approx c", "c"),
        # \le matches inside \left, so any \left(...) is sliced, even with no relation at all.
        (r"\left(a+b\right)^2", "left(a+b)^2", "(a+b)^2"),
        (r"x = \left(a\right)", "left(a)", "(a)"),
        # \infty is deleted outright.
        (r"-\infty", "-", r"-\infty"),
        # Command names match as prefixes and a brace-less command swallows the next character.
        (r"\textbf{x}", "f{x}", r"\textbf{x}"),
        # I is rewritten even inside a command name.
        (r"\Im z + I", r"\\bar{I}m z + \bar{I}", r"\Im z + \bar{I}"),
        # The first brace group is unwrapped whenever no } follows it, text around it is lost.
        (r"2{a}+3", "a", "2{a}+3"),
    ],
)
def test_strict_keeps_the_published_defects_and_fixed_repairs_them(
    latex: str, strict: str, fixed: str
) -> None:
    assert preprocess(latex, "strict") == strict
    assert preprocess(latex, "fixed") == fixed


@pytest.mark.parametrize("latex", [r"\text{m} + \text{s}", r"\hat x + \hat y", r"\boxed{\boxed{x}}"])
def test_a_repeated_command_fails_in_strict_mode_as_published(latex: str) -> None:
    # The published remove_command recurses into a nested, empty function that returns None.
    with pytest.raises(PreprocessError):
        preprocess(latex, "strict")
    assert "\\" not in preprocess(latex, "fixed").replace("\\bar", "")


def test_unbalanced_input_skips_the_first_stage() -> None:
    # The published first stage gives up on unbalanced brackets and returns the string as is.
    assert preprocess(r"\boxed{x = (a", "strict") == r"\boxed{x = (a"


def test_relation_slicing_keeps_the_whole_string_without_relations() -> None:
    assert keep_after_last_relation("  m g h ") == "m g h"
    assert keep_after_last_relation("a < b", "fixed") == "b"


def test_unknown_mode_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown EED mode"):
        preprocess("x", "lenient")  # type: ignore[arg-type]
