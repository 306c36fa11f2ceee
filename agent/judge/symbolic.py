"""Symbolic pre-check: equivalent algebraic expressions settle CORRECT without the judge.

Only plain algebra is tried: both sides must use a whitelisted set of characters and LaTeX
commands (fractions, roots, powers, Greek letters, elementary functions). Anything that could
carry meaning the algebra would drop goes to the judge instead: vectors and hats, units in
``\\text``, relations and ``\\approx``, absolute values, several answers separated by commas,
and words (three or more letters in a row outside a command, or two letters standing alone
between spaces, like "or"), which sympy would read as products of one-letter symbols.

The answer's shape follows the pre-check's whitelist (agent/judge/precheck.py): one expression,
or one expression behind a single ``name =`` with a bare name. Chains of ``=``, equations and
anything longer than ``MAX_LENGTH`` characters or nested deeper than ``MAX_NESTING`` defer.

Equivalence itself is the EED scorer's: sympy conversion, simplification and ``equals`` in a
killable worker under a hard time limit, in its ``fixed`` mode (without the published
preprocessing defects). Like EED, it treats symbols as positive, the usual reading of physical
quantities; a result that holds only for negative values could be misjudged, which is why the
whitelist is narrow and the switch exists (``symbolic_precheck: false``).
"""

from __future__ import annotations

import re

from proctor.agent.judge.precheck import normalize_answer, split_assignment
from proctor.agent.text.answer_shape import GREEK_LETTERS, nesting_depth

GREEK = GREEK_LETTERS
FUNCTIONS = (
    "sin",
    "cos",
    "tan",
    "cot",
    "sec",
    "csc",
    "sinh",
    "cosh",
    "tanh",
    "arcsin",
    "arccos",
    "arctan",
    "ln",
    "log",
    "exp",
)
SAFE_COMMANDS = frozenset({"frac", "sqrt", "cdot", "times", "hbar", *GREEK, *FUNCTIONS})

_COMMAND = re.compile(r"\\([A-Za-z]+)")
_WORD = re.compile(r"[A-Za-z]{3,}")
# A two-letter token with a space on either side ("3 or 4", "(or x)", "x to y") reads as a word,
# not a product, so it defers; products can be written "mv" or "m v" ("2 mv" goes to the judge).
_STANDALONE_PAIR = re.compile(r"(?<![A-Za-z])[A-Za-z]{2}(?=\s)|(?<=\s)[A-Za-z]{2}(?![A-Za-z])")
_SAFE_CHARACTERS = re.compile(r"[A-Za-z0-9+\-*/^_{}(). \\]+")
# "1e999" and "0x1F" are numbers in other notations, not products of symbols.
_NUMBER_NOTATION = re.compile(r"[0-9][eE][+-]?[0-9]|0[xX][0-9A-Fa-f]")
MAX_LENGTH = 300
MAX_NESTING = 12
MAX_INPUT_CHARS = 2_000


def is_plain_algebra(text: str) -> bool:
    if not text or len(text) > MAX_LENGTH or not _SAFE_CHARACTERS.fullmatch(text):
        return False
    if nesting_depth(text) > MAX_NESTING:
        return False
    plain = _COMMAND.sub("#", text)  # a command is an operand, not a separator
    if not re.search(r"[A-Za-z]", plain) and "\\pi" not in text:
        return False  # pure numbers are the numeric rule's business
    if _NUMBER_NOTATION.search(text):
        return False
    if _WORD.search(plain) or _STANDALONE_PAIR.search(plain):
        # Words parse as products of one-letter symbols, so "iron oxide" would equal "oxide iron"
        # and "3 or 4" would be the product 12·o·r.
        return False
    return all(name in SAFE_COMMANDS for name in _COMMAND.findall(text))


def symbolic_pair(reference: str, answer: str | None) -> tuple[str, str] | None:
    """The (reference, answer) expressions to compare symbolically, or None when unsafe to try."""
    if answer is None:
        return None
    if len(answer) > MAX_INPUT_CHARS or len(reference) > MAX_INPUT_CHARS:
        return None  # bound the normalisation work before looking at the shape
    if _STANDALONE_PAIR.search(_COMMAND.sub("#", answer)):
        return None  # "\\frac{R}{3} or \\frac{R}{2}": normalisation would glue the "or" in
    reference_parts = split_assignment(normalize_answer(reference))
    answer_parts = split_assignment(normalize_answer(answer))
    if reference_parts is None or answer_parts is None:
        return None  # a chain of =, or an equation: not one committed value
    (ref_lhs, ref_rhs), (ans_lhs, ans_rhs) = reference_parts, answer_parts
    if ref_lhs is not None and ans_lhs is not None and ref_lhs != ans_lhs:
        return None  # two different quantities, whatever their values
    for side in (ref_rhs, ans_rhs):
        if not is_plain_algebra(side):
            return None
    return ref_rhs, ans_rhs
