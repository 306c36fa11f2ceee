"""Shapes of a committed answer, shared by the Olympiad pre-checks and EED's fixed mode.

An answer may be reduced (``x = 5`` -> ``5``) or read as a single value only when it has one of
a few known shapes. Everything here is pure string work with linear scans and bounded regexes,
so it is safe on any text a model sends: the callers cap the length before calling.
"""

from __future__ import annotations

import re

GREEK_LETTERS = (
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

_GREEK = "|".join(sorted(GREEK_LETTERS, key=len, reverse=True))
_LETTER = rf"(?:[A-Za-zα-ωΑ-Ω]|\\(?:{_GREEK})(?![A-Za-z]))"
_ACCENTED = (
    rf"(?:\\(?:vec|hat|bar|dot|ddot|tilde|mathbf|boldsymbol|mathrm)\s*\{{\s*{_LETTER}\s*\}}|{_LETTER})"
)
# A subscript is a label: one word of letters and digits, optionally behind one command (\rm,
# \text, \max). No spaces: "x_{5 or 6}" is not a name.
_SUBSCRIPT = (
    r"(?:_\s*(?:[A-Za-z0-9]"
    r"|\{\s*(?:\\[A-Za-z]+\s*)?\{?[A-Za-z0-9]{0,16}\}?\s*\}"
    r"|\\[A-Za-z]+\s*[A-Za-z0-9]?))"
)
# Arguments of a named function, ``y(x)`` or ``B(x,y,z)``: single letters only.
_ARGUMENTS = r"(?:\(\s*[A-Za-z](?:\s*,\s*[A-Za-z]){0,3}\s*\))"
_PRIME = r"(?:'{1,2}|\^\{?\\prime\}?)"
BARE_NAME = re.compile(
    rf"\s*(?:\\langle\s*{_ACCENTED}\s*\\rangle"
    rf"|(?:\\Delta\s*|\\delta\s*)?{_ACCENTED}{_SUBSCRIPT}?{_PRIME}?{_ARGUMENTS}?)\s*"
)


def is_bare_name(text: str) -> bool:
    """``T``, ``R_{eq}``, ``\\omega_{\\rm sum}``, ``\\Delta S``, ``y(x)``: a quantity's name, not a value."""
    return len(text) <= 60 and BARE_NAME.fullmatch(text) is not None


def nesting_depth(text: str) -> int:
    """Deepest nesting of (), [] and {} (unbalanced text counts what it opens)."""
    depth = deepest = 0
    for char in text:
        if char in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in ")]}":
            depth = max(0, depth - 1)
    return deepest


_BOXED = re.compile(r"\\boxed\s*\{")


def boxed_contents(text: str, limit: int = 64) -> list[str]:
    """Contents of the outermost ``\\boxed{...}`` groups, left to right, at most ``limit``.

    One forward scan: a box nested in another is part of the outer one's content; an unclosed box
    ends the scan. Braces escaped with a backslash do not count, as in ``extract_boxed``.
    """
    found: list[str] = []
    position = 0
    while len(found) < limit:
        match = _BOXED.search(text, position)
        if match is None:
            break
        depth = 1
        index = match.end()
        while index < len(text) and depth:
            char = text[index]
            if char == "\\":
                index += 2
                continue
            if char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
            index += 1
        if depth:
            break
        found.append(text[match.end() : index - 1])
        position = index
    return found


def distinct(values: list[str]) -> list[str]:
    """Values in first-seen order without repeats (compared with surrounding space stripped)."""
    seen: dict[str, None] = {}
    for value in values:
        seen.setdefault(value.strip(), None)
    return list(seen)
