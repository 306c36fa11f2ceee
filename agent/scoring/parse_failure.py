"""Which side of an EED pair did not parse, and why, in words a user can act on.

The worker records a conversion failure as ``parse_error`` with ``detail``
``"answer: LaTeXParsingError: I expected something else here\\nx**2\\n~~^"`` (the parser's
message, the text it read, a marker under the column). `proctor score eed` turns that into one
line: ``the answer 'x**2' does not parse as LaTeX: I expected something else here, at character
3 ('**2'); LaTeX writes a power as x^{2}``.
"""

from __future__ import annotations

import re
from typing import NamedTuple

_SIDE = re.compile(r"\b(?P<side>reference|answer): (?P<kind>[A-Za-z_][\w.]*): (?P<message>.*)", re.DOTALL)
_MARKER = re.compile(r"^~*\^$")
# Python's and calculators' ways that LaTeX says otherwise: (what is written, what LaTeX writes).
_NOT_LATEX = (
    ("**", "a power as x^{2}"),
    ("sqrt(", "a root as \\sqrt{x}"),
    ("//", "a quotient as \\frac{a}{b}"),
)
_SHOWN = 40


class ParseFailure(NamedTuple):
    side: str  # "reference" or "answer"
    why: str


def parse_failure(detail: str | None, reference: str, answer: str) -> ParseFailure | None:
    """The side that failed and a one-line reason, from a ``parse_error`` result's detail."""
    if not detail:
        return None
    match = _SIDE.search(detail)
    if match is None:
        return None
    side, message = match["side"], match["message"]
    if detail[: match.start()].endswith("(") and message.endswith(")"):
        message = message[:-1]  # a hedged answer's reading wraps its detail in parentheses
    text = reference if side == "reference" else answer
    return ParseFailure(
        side, f"{_shown(text)} does not parse as LaTeX: {_reason(match['kind'], message, text)}"
    )


def _shown(text: str) -> str:
    # Quoted as typed: repr would double every backslash of the LaTeX.
    return "'" + (text if len(text) <= _SHOWN else text[:_SHOWN] + "…") + "'"


def _reason(kind: str, message: str, text: str) -> str:
    lines = message.split("\n")
    reason = lines[0].strip() or kind
    # The parser's own picture: the text it read and "~~^" under the column it stopped at.
    if len(lines) >= 3 and _MARKER.match(lines[2].strip()):
        column = len(lines[2].rstrip()) - 1
        rest = lines[1][column : column + 12]
        reason += f", at character {column + 1} ('{rest}')" if rest else ", at its end"
    elif kind not in ("LaTeXParsingError", "ParseError"):
        reason = f"{kind}: {reason}"
    hints = [writes for written, writes in _NOT_LATEX if written in text]
    if hints:
        reason += "; LaTeX writes " + " and ".join(hints)
    return " ".join(reason.split())
