"""Symbolic pre-check: equivalent algebraic expressions settle CORRECT without the judge.

Only plain algebra is tried: both sides must use a whitelisted set of characters and LaTeX
commands (fractions, roots, powers, Greek letters, elementary functions). Anything that could
carry meaning the algebra would drop goes to the judge instead: vectors and hats, units in
``\\text``, relations and ``\\approx``, absolute values, several answers separated by commas,
and words (three or more letters in a row outside a command), which sympy would read as
products of one-letter symbols.

Equivalence itself is the EED scorer's: sympy conversion, simplification and ``equals`` in a
killable worker under a hard time limit, in its ``fixed`` mode (without the published
preprocessing defects). Like EED, it treats symbols as positive, the usual reading of physical
quantities; a result that holds only for negative values could be misjudged, which is why the
whitelist is narrow and the switch exists (``symbolic_precheck: false``).
"""

from __future__ import annotations

import re

from agent.judge.precheck import normalize_answer, split_assignment

GREEK = (
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "varepsilon",
    "zeta",
    "eta",
    "theta",
    "vartheta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "pi",
    "varpi",
    "rho",
    "varrho",
    "sigma",
    "varsigma",
    "tau",
    "upsilon",
    "phi",
    "varphi",
    "chi",
    "psi",
    "omega",
    "Gamma",
    "Delta",
    "Theta",
    "Lambda",
    "Xi",
    "Pi",
    "Sigma",
    "Upsilon",
    "Phi",
    "Psi",
    "Omega",
)
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
_SAFE_CHARACTERS = re.compile(r"[A-Za-z0-9+\-*/^_{}(). \\]+")
MAX_LENGTH = 300


def is_plain_algebra(text: str) -> bool:
    if not text or len(text) > MAX_LENGTH or not _SAFE_CHARACTERS.fullmatch(text):
        return False
    plain = _COMMAND.sub(" ", text)
    if not re.search(r"[A-Za-z]", plain) and "\\pi" not in text:
        return False  # pure numbers are the numeric rule's business
    if _WORD.search(plain):
        # Words parse as products of one-letter symbols, so "iron oxide" would equal "oxide iron".
        return False
    return all(name in SAFE_COMMANDS for name in _COMMAND.findall(text))


def symbolic_pair(reference: str, answer: str | None) -> tuple[str, str] | None:
    """The (reference, answer) expressions to compare symbolically, or None when unsafe to try."""
    if answer is None:
        return None
    ref_lhs, ref_rhs = split_assignment(normalize_answer(reference))
    ans_lhs, ans_rhs = split_assignment(normalize_answer(answer))
    if ref_lhs is not None and ans_lhs is not None and ref_lhs != ans_lhs:
        return None  # two different quantities, whatever their values
    for side in (ref_rhs, ans_rhs):
        if "=" in side or not is_plain_algebra(side):
            return None
    return ref_rhs, ans_rhs
