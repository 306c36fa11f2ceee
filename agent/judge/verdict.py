"""Parsing the judge's verdict: its own last line, and only that.

Both FrontierScience prompts tell the judge to put the verdict alone on the last line ("with no
other text or formatting" / "no other text"). The parser holds the judge to that:

* **Lines are split on ``\\n`` only** (a ``\\r`` right before it belongs to the break, so
  ``\\r\\n`` works). U+2028, U+2029, NEL, ``\\x1c``-``\\x1e``, ``\\v``, ``\\f`` and a lone
  ``\\r`` are characters of the line they sit in, never breaks: ``str.splitlines`` (which
  splits on all of them) is not used on a reply, so ``3\\u2028VERDICT: 9`` is one line that is
  not a verdict.
* **Blank lines** are lines of spaces and tabs only. Surrounding spaces and tabs are stripped;
  nothing else (``str.strip`` would also strip U+2028 and friends, so a verdict line after a
  "blank" U+2028 line would look like the last line).
* **The last non-blank line must be exactly the verdict**: ``VERDICT: CORRECT`` /
  ``VERDICT: INCORRECT``, or ``VERDICT: <points>`` in plain ASCII decimals within 0..max.
  Markdown emphasis, quotes, a lower-case verdict, trailing prose, a hidden second verdict behind
  a separator character: parse errors.
* **Exactly one verdict-shaped line.** Any earlier line that reads as a verdict, however spelled
  (:func:`looks_like_verdict`), makes the reply ambiguous: the judge quoted the candidate's own
  ``VERDICT: CORRECT``, or changed its mind. That is a parse error, never "the later line wins".

A parse error never becomes a verdict: the caller retries the judge and finally records
``judge_error`` (or blames the answer, ``agent/judge/grading.py``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from proctor.agent.judge.lookalike import skeleton


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
# Only spaces and tabs are blank: every other space-like or break-like character is content.
_BLANKS = " \t"
# On a skeleton (agent/judge/lookalike.py): the word "verdict", then within a few characters of
# markup or spacing (``**``, backticks, quotes, U+2028, ``=``), a colon, a verdict word or a
# number. "the verdict is correct" is prose (a letter intervenes); "VERDICT - 9",
# "**Verdict**: correct", "VERDICT\u2028: 9", "verdict=INCORRECT" all read as verdicts.
# Never across a "\n": the reply's earlier lines are searched as one text, line by line.
_VERDICT_SHAPE = re.compile(r"verdict[^\w\n]{0,24}?(?::|=|correct|incorrect|\d)")
# The word spelled with gaps between its letters, then a verdict word or a digit, all gaps
# markup or spacing: "V E R D I C T  CORRECT", "V.E.R.D.I.C.T 9". A gap never holds a letter,
# so no letter is tried twice: linear.
_GAP = r"[^\w\n]*"


def _spaced(word: str) -> str:
    return _GAP.join(map(re.escape, word))


_SPACED_VERDICT = re.compile(
    _spaced("verdict") + _GAP + f"(?:{_spaced('incorrect')}|{_spaced('correct')}|\\d)"
)


def reply_lines(reply: str | None) -> list[str]:
    """The reply's lines, split on ``\\n`` only; a ``\\r`` before the ``\\n`` is part of the break."""
    lines = (reply or "").split("\n")
    return [line[:-1] if line.endswith("\r") and i < len(lines) - 1 else line for i, line in enumerate(lines)]


def looks_like_verdict(text: str) -> bool:
    """Whether ``text`` would read as a verdict, in any case, markup or look-alike spelling."""
    return _first_verdict_shaped_line(text) is not None


def _first_verdict_shaped_line(text: str) -> int | None:
    """Index of the first ``\\n``-line of ``text`` that reads as a verdict, if any.

    One skeleton of the whole text, not one per line: the skeleton keeps every ``\\n`` and the
    patterns never cross one, so a hit's line is the count of ``\\n`` before it.
    """
    form = skeleton(text).replace("_", " ")  # underscores are markup (``__VERDICT__``)
    found = [
        form.count("\n", 0, hit.start())
        for pattern in (_VERDICT_SHAPE, _SPACED_VERDICT)
        if (hit := pattern.search(form)) is not None
    ]
    return min(found, default=None)


def verdict_line(reply: str | None, form: re.Pattern[str], what: str) -> re.Match[str]:
    """The reply's last non-blank line, matched against ``form``, if it is the only verdict.

    Raises :class:`VerdictParseError` for an empty reply, a last line that is not exactly of
    the form (``what`` says which), or an earlier line that also reads as a verdict.
    """
    lines = reply_lines(reply)
    last = next((i for i in range(len(lines) - 1, -1, -1) if lines[i].strip(_BLANKS)), None)
    if last is None:
        raise VerdictParseError("the judge's reply is empty")
    line = lines[last].strip(_BLANKS)
    match = form.fullmatch(line)
    if match is None:
        raise VerdictParseError(f"last line {_shorten(line)!r} is not {what}")
    other = _first_verdict_shaped_line("\n".join(lines[:last]))
    if other is not None:
        raise VerdictParseError(
            f"more than one verdict line: line {other + 1} {_shorten(lines[other].strip(_BLANKS))!r} "
            "also reads as a verdict"
        )
    return match


def parse_binary_verdict(reply: str | None) -> BinaryVerdict:
    match = verdict_line(reply, _BINARY_LINE, "exactly 'VERDICT: CORRECT' or 'VERDICT: INCORRECT'")
    return BinaryVerdict(correct=match.group(1) == "CORRECT")


def parse_points_verdict(reply: str | None, *, max_points: float = 10.0) -> PointsVerdict:
    match = verdict_line(reply, _POINTS_LINE, "of the form 'VERDICT: <points>'")
    points = float(match.group(1))
    if not math.isfinite(points) or not 0.0 <= points <= max_points:
        raise VerdictParseError(f"points {match.group(1)} outside 0..{max_points:g}")
    return PointsVerdict(points=points)


def _shorten(line: str, limit: int = 120) -> str:
    return line if len(line) <= limit else line[: limit - 3] + "..."
