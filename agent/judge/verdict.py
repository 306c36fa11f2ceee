"""Parsing the judge's verdict from the last non-empty line of its reply.

Both FrontierScience prompts tell the judge to put the verdict alone on the last line ("with no
other text or formatting" / "no other text"). The parser holds the judge to that: surrounding
whitespace is stripped, nothing else is forgiven. Markdown emphasis, quotes, a lower-case
verdict, trailing prose, or a number outside 0..10 are parse errors. A parse error never
becomes a verdict: the caller retries the judge and finally records ``judge_error``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass


class VerdictParseError(ValueError):
    """The reply's last line is not a verdict of the form the prompt asked for."""


@dataclass(frozen=True)
class BinaryVerdict:
    correct: bool

    @property
    def text(self) -> str:
        return "CORRECT" if self.correct else "INCORRECT"


@dataclass(frozen=True)
class PointsVerdict:
    points: float

    @property
    def text(self) -> str:
        return f"{self.points:g}"


_BINARY_LINE = re.compile(r"VERDICT: (CORRECT|INCORRECT)")
# Plain decimal numbers only: no fractions ("7/10"), no exponents, no units, and ASCII digits
# only (``\d`` would also take "１０" or "١٠", which float() reads as 10).
_POINTS_LINE = re.compile(r"VERDICT: ([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))")


def last_nonempty_line(reply: str | None) -> str:
    for line in reversed((reply or "").splitlines()):
        if line.strip():
            return line.strip()
    raise VerdictParseError("the judge's reply is empty")


def parse_binary_verdict(reply: str | None) -> BinaryVerdict:
    line = last_nonempty_line(reply)
    match = _BINARY_LINE.fullmatch(line)
    if match is None:
        raise VerdictParseError(
            f"last line {_shorten(line)!r} is not exactly 'VERDICT: CORRECT' or 'VERDICT: INCORRECT'"
        )
    return BinaryVerdict(correct=match.group(1) == "CORRECT")


def parse_points_verdict(reply: str | None, *, max_points: float = 10.0) -> PointsVerdict:
    line = last_nonempty_line(reply)
    match = _POINTS_LINE.fullmatch(line)
    if match is None:
        raise VerdictParseError(f"last line {_shorten(line)!r} is not of the form 'VERDICT: <points>'")
    points = float(match.group(1))
    if not math.isfinite(points) or not 0.0 <= points <= max_points:
        raise VerdictParseError(f"points {match.group(1)} outside 0..{max_points:g}")
    return PointsVerdict(points=points)


def _shorten(line: str, limit: int = 120) -> str:
    return line if len(line) <= limit else line[: limit - 3] + "..."
