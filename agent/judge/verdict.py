"""Parsing the judge's verdict: its own last line, read as the judge meant it.

Both FrontierScience prompts tell the judge to end with the verdict alone on its last line. The
parser reads that line the way a careful human grader would, and refuses only what could be read
two ways (docs/judge-tracks.md, "Verdict parsing", is the specification; this is its code):

* **Lines are split on ``\\n`` only** (a ``\\r`` right before it belongs to the break, so
  ``\\r\\n`` works). U+2028, U+2029, NEL, ``\\x1c``-``\\x1e``, ``\\v``, ``\\f`` and a lone
  ``\\r`` are characters of the line they sit in, never breaks, so ``3\\u2028VERDICT: 9`` is one
  line that is not a verdict: a second line smuggled behind such a character is never read.
* **The verdict is the last line with content**: lines of spaces and tabs, and lines of markup
  alone (a closing code fence, ``$$``, ``---``), are skipped.
* **That line, stripped of markup and one trailing full stop, must read** ``VERDICT: CORRECT`` /
  ``VERDICT: INCORRECT`` or ``VERDICT: <points>``, in upper-case ASCII as the prompt wrote it.
  Markup (:data:`MARKUP`) is decoration a renderer removes: markdown emphasis and code marks,
  a heading or list mark, LaTeX text and math wrappers. Quotation marks, a block quote (``>``)
  and strikethrough are not markup: they say the words are someone else's, or withdrawn.
* **Points** are a plain decimal number read exactly (:class:`decimal.Decimal`, never float)
  within 0..max_points: ``6.9999999999999999`` is below 7. Exponents, fractions, commas and
  digits of other scripts are format failures: each is unusual or ambiguous (``7,5``).
* **A conflict is an earlier line that is itself a verdict** (:func:`verdict_claims`): the whole
  line, in any case, dress or look-alike spelling, is the word "verdict" and one value, and no
  more. Prose that mentions a verdict ("before my verdict: check units", "the candidate wrote
  VERDICT: CORRECT at the end") is not one. An Olympiad reply conflicts when such a line claims
  another value than the last line. A Research reply may hold one ``VERDICT: n`` per rubric
  item: the earlier lines must tally to the last line's total (they sum to it once restatements
  of the total at either end are left out), else the reply conflicts.
* **An answer that carries a verdict of its own** (:func:`carries_a_verdict`: the word in any
  case, look-alike or spaced spelling, then a colon, ``=``, a verdict word or a number) could
  be where a verdict line in the reply came from: the judge may have quoted it. Then every
  other line that reads as a verdict, prose mentions included (:func:`looks_like_verdict`), is
  a conflict, whatever its value; per-item lines too.

A parse error never becomes a verdict: the caller retries the judge and finally records
``judge_error`` or blames the answer (``agent/judge/grading.py``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal, Inexact, localcontext

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
    points: Decimal  # exactly as the judge wrote it: compared exactly, never through a float

    @property
    def text(self) -> str:
        """The points as written, without trailing fractional zeros: ``10.0`` -> ``10``."""
        return format(self.points.normalize(), "f")

    @property
    def as_float(self) -> float:
        """The largest float not above the points: a stored score never reads above the grade."""
        value = float(self.points)
        return math.nextafter(value, -math.inf) if Decimal(value) > self.points else value


# The markup a line may carry around the words of its verdict (docs/judge-tracks.md lists it):
# markdown emphasis and code (* _ `), braces and LaTeX text/math wrappers, spaces and tabs.
# Every alternative starts with its own character or command, so matching is linear.
_LATEX_WRAPPERS = (
    "textbf", "textit", "texttt", "textsf", "textrm", "text", "mathbf", "mathrm", "mathit",
    "mathtt", "mathsf", "boldsymbol", "boxed", "fbox", "emph", "underline",
)  # fmt: skip
MARKUP = (
    r"(?:[ \t*_`${}]"
    rf"|\\(?:{'|'.join(_LATEX_WRAPPERS)})[ \t]*\{{"
    r"|\\[()\[\]])*"
)
# One heading, list or enumeration mark may open the line ("## VERDICT: CORRECT").
_LINE_MARK = r"(?:#{1,6}|[-+]|[0-9]{1,3}[.)])?"
_FULL_STOP = rf"(?:\.{MARKUP})?"
_BINARY_LINE = re.compile(
    rf"{_LINE_MARK}{MARKUP}VERDICT{MARKUP}:{MARKUP}(?P<value>CORRECT|INCORRECT){MARKUP}{_FULL_STOP}"
)
# Plain decimals in ASCII digits: "7", "7.5", ".5", "007.50" (a sign is read, so that "-1" is
# refused as outside the range). A "." after the digits is the full stop ("VERDICT: 7."),
# which is why the fraction needs a digit.
_POINTS_LINE = re.compile(
    rf"{_LINE_MARK}{MARKUP}VERDICT{MARKUP}:{MARKUP}"
    rf"(?P<value>[+-]?(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)){MARKUP}{_FULL_STOP}"
)
# More digits than any rubric awards: refused before Decimal sees them (a reply can be huge).
MAX_POINTS_CHARS = 60
# Lines with nothing to read: blank (spaces and tabs only), or markup alone, such as the fence
# closing a code block around the verdict, "$$", "\]" or a "---" rule.
_BLANKS = " \t"
_NOTHING_TO_READ = re.compile(r"[ \t`*_~=#>$-]*|[ \t]*\\[\[\]][ \t]*")

# --- what reads as a verdict, for the conflict check ----------------------------------------
# Every character some reader shows as a line break (str.splitlines breaks at all of them).
# A line the parser reads as one may show as several, each of which may read as a verdict.
_READER_BREAKS = re.compile("[\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
# The LaTeX wrappers of MARKUP, on a skeleton (lower case): removed before a line is read.
_LATEX_MARKUP = re.compile(rf"\\(?:{'|'.join(_LATEX_WRAPPERS)})[ \t]*\{{|\\[()\[\]]")
_GAP = r"[^\w\n]*"  # markup, spacing, quotes, colons: anything but letters, digits and "\n"


def _spaced(word: str) -> str:
    return _GAP.join(map(re.escape, word))


# On a skeleton (agent/judge/lookalike.py), one line that is a verdict and nothing else: an
# optional list number, the word (its letters possibly spaced out: "V E R D I C T"), then one
# value: a verdict word (also spaced out) or a number. Nothing but markup, spacing and
# punctuation around and between them: "Verdict: see below" and "Verdict: pending" are prose.
# Each gap is followed by a letter or digit it cannot contain, so a line is matched in linear
# time.
_CLAIM_LINE = re.compile(
    rf"^{_GAP}(?:[0-9]{{1,3}}[.)]{_GAP})?{_spaced('verdict')}{_GAP}"
    rf"(?P<value>{_spaced('incorrect')}|{_spaced('correct')}|\d+(?:[.,/]\d+)*){_GAP}$",
    re.MULTILINE,
)
# Anywhere in a line, for answers that spell the word themselves (module docstring): the word
# "verdict", then within a few characters of markup or spacing (``**``, backticks, quotes,
# U+2028, ``=``), a colon, a verdict word or a number. "the verdict is correct" is not (a letter
# intervenes); "**Verdict**: correct", "VERDICT\u2028: 9", "verdict=INCORRECT" are.
_VERDICT_SHAPE = re.compile(r"verdict[^\w\n]{0,24}?(?::|=|correct|incorrect|\d)")
_SPACED_VERDICT = re.compile(
    _spaced("verdict") + _GAP + f"(?:{_spaced('incorrect')}|{_spaced('correct')}|\\d)"
)
# A verdict in an answer, in any spelling a judge could turn back into "VERDICT: ...": the
# word's letters spaced out by anything but letters and digits, line breaks included, then
# within a few such characters a colon, "=", a verdict word or a digit. Not only at a word's
# start: the skeleton deletes control characters, so "x\x85VERDICT: 9" reads "xverdict: 9".
# Prose about a verdict ("the jury's verdict was unanimous") carries none.
_ANY_GAP = r"[\W_]*"


def _spaced_anyhow(word: str) -> str:
    return _ANY_GAP.join(map(re.escape, word))


_CARRIED_VERDICT = re.compile(
    _spaced_anyhow("verdict")
    + rf"[\W_]{{0,24}}?(?::|=|{_spaced_anyhow('incorrect')}|{_spaced_anyhow('correct')}|\d)"
)


@dataclass(frozen=True)
class Claim:
    """An earlier line of a reply that is itself a verdict."""

    line: int  # index of the reply's ``\\n``-line
    value: str  # the claimed value, lower case, spaced-out letters joined: "correct", "7.5"


def reply_lines(reply: str | None) -> list[str]:
    """The reply's lines, split on ``\\n`` only; a ``\\r`` before the ``\\n`` is part of the break."""
    lines = (reply or "").split("\n")
    return [line[:-1] if line.endswith("\r") and i < len(lines) - 1 else line for i, line in enumerate(lines)]


def carries_a_verdict(text: str | None) -> bool:
    """Whether ``text`` holds a verdict in any case, look-alike or spaced spelling, even one
    spread over several lines (the module docstring says why an answer's verdict matters)."""
    return bool(text) and _CARRIED_VERDICT.search(skeleton(text or "").replace("_", " ")) is not None


def looks_like_verdict(text: str) -> bool:
    """Whether ``text`` reads as a verdict anywhere, in any case, markup or look-alike spelling."""
    return _first_verdict_shaped_line(text) is not None


def _first_verdict_shaped_line(text: str) -> int | None:
    """Index of the first ``\\n``-line of ``text`` that reads as a verdict anywhere in it, if any.

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


def verdict_claims(text: str) -> list[Claim]:
    """Lines of ``text`` (split on ``\\n``) that are themselves verdicts, in order.

    A line counts once per piece a reader sees: split at every line break character
    (``prose\\u2028VERDICT: 9`` holds the claim ``9``), and as a whole when no piece is a claim
    (``VERDICT\\u2028: 9``). Two skeletons of the whole text and one regex pass each.
    """
    return list(_iter_claims(text))


def _iter_claims(text: str) -> Iterator[Claim]:
    """:func:`verdict_claims`, lazily when the text has no other line break than ``\\n``."""
    if not text:
        return
    broken = _READER_BREAKS.sub("\n", text)  # one character for one: "\n" positions line up
    if broken == text:
        for line, value in _claims_in_form(skeleton(text).replace("_", " ")):
            yield Claim(line, value)
        return
    real_breaks = [text[hit.start()] == "\n" for hit in re.finditer("\n", broken)]
    by_line: dict[int, list[str]] = {}
    for line, value in _claims_in(broken, real_breaks):
        by_line.setdefault(line, []).append(value)
    for line, value in _claims_in_form(skeleton(text).replace("_", " ")):
        by_line.setdefault(line, [value])  # the whole line counts only when no piece does
    for line in sorted(by_line):
        for value in by_line[line]:
            yield Claim(line, value)


def _claims_in(broken: str, real_breaks: list[bool]) -> Iterator[tuple[int, str]]:
    """Claims on the pieces of ``broken``, with the index of the original's ``\\n``-line."""
    form = _LATEX_MARKUP.sub(" ", skeleton(broken).replace("_", " "))
    pieces_seen, line, position = 0, 0, 0
    for hit in _CLAIM_LINE.finditer(form):
        count = form.count("\n", position, hit.start())
        line += sum(real_breaks[pieces_seen : pieces_seen + count])
        pieces_seen += count
        position = hit.start()
        yield line, _claimed_value(hit.group("value"))


def _claims_in_form(form: str) -> Iterator[tuple[int, str]]:
    form = _LATEX_MARKUP.sub(" ", form)  # "\\textbf{VERDICT: 3}" is a verdict line like "**VERDICT: 3**"
    line, position = 0, 0
    for hit in _CLAIM_LINE.finditer(form):
        line += form.count("\n", position, hit.start())
        position = hit.start()
        yield line, _claimed_value(hit.group("value"))


def _claimed_value(value: str) -> str:
    """A claim's value, comparable: spaced-out letters joined ("c o r r e c t" -> "correct")."""
    if value.isalnum() or value[:1].isdigit():
        return value
    return re.sub(r"[\W_]+", "", value)


def _last_line(reply: str | None) -> tuple[list[str], int, str]:
    """The reply's lines, the index of its last line with content, and that line stripped."""
    lines = reply_lines(reply)
    for index in range(len(lines) - 1, -1, -1):
        if not _NOTHING_TO_READ.fullmatch(lines[index]):
            return lines, index, lines[index].strip(_BLANKS)
    raise VerdictParseError("the judge's reply is empty")


def _not_the_form(line: str, what: str) -> VerdictParseError:
    return VerdictParseError(f"last line {_shorten(line)!r} is not {what}")


def _conflict(lines: list[str], index: int, why: str) -> VerdictParseError:
    return VerdictParseError(
        f"more than one verdict line: line {index + 1} {_shorten(lines[index].strip(_BLANKS))!r} {why}"
    )


def _refuse_any_other_verdict(lines: list[str], last: int, answer: str | None) -> None:
    """An answer that carries a verdict may be the source of any verdict line: allow no other."""
    if not carries_a_verdict(answer):
        return
    earlier = "\n".join(lines[:last])
    found = _first_verdict_shaped_line(earlier)
    if found is None and (claim := next(_iter_claims(earlier), None)) is not None:
        found = claim.line  # a claim with a longer gap than the shape allows
    if found is not None:
        raise _conflict(lines, found, "also reads as a verdict, and the answer carries a verdict itself")


def parse_binary_verdict(reply: str | None, *, answer: str | None = None) -> BinaryVerdict:
    """The Olympiad verdict on the reply's last line.

    ``answer`` is the attempted answer the judge was shown, when known: if it carries a verdict
    itself, any other verdict-shaped line in the reply is a conflict (module docstring).
    """
    lines, last, line = _last_line(reply)
    match = _BINARY_LINE.fullmatch(line)
    if match is None:
        raise _not_the_form(line, "'VERDICT: CORRECT' or 'VERDICT: INCORRECT'")
    verdict = BinaryVerdict(correct=match.group("value") == "CORRECT")
    _refuse_any_other_verdict(lines, last, answer)
    for claim in _iter_claims("\n".join(lines[:last])):
        if claim.value != verdict.text.lower():
            raise _conflict(lines, claim.line, f"claims another verdict than the last line ({verdict.text})")
    return verdict


def parse_points_verdict(
    reply: str | None, *, max_points: float = 10.0, answer: str | None = None
) -> PointsVerdict:
    """The Research score on the reply's last line, exactly, within 0..``max_points``.

    Earlier verdict lines are the rubric items: they must tally to the score (module docstring).
    ``answer`` as for :func:`parse_binary_verdict`.
    """
    lines, last, line = _last_line(reply)
    match = _POINTS_LINE.fullmatch(line)
    if match is None:
        raise _not_the_form(line, "of the form 'VERDICT: <points>'")
    written = match.group("value")
    if len(written) > MAX_POINTS_CHARS:
        raise VerdictParseError(f"points written with more than {MAX_POINTS_CHARS} characters")
    points = Decimal(written)
    if not 0 <= points <= Decimal(repr(float(max_points))):
        raise VerdictParseError(f"points {written} outside 0..{max_points:g}")
    _refuse_any_other_verdict(lines, last, answer)
    claims = verdict_claims("\n".join(lines[:last]))
    if claims and not _tally(claims, points):
        raise _conflict(
            lines,
            claims[0].line,
            f"and the other verdict lines do not tally to the last line's total ({written})",
        )
    return PointsVerdict(points=points)


_ITEM_POINTS = re.compile(r"[0-9]+(?:\.[0-9]+)?")


def _tally(claims: list[Claim], total: Decimal) -> bool:
    """Whether earlier verdict lines are the rubric items of ``total``: left out restatements
    of the total at either end (a score given first, a total repeated before the final line),
    the rest sum to the total, or nothing is left."""
    if not all(_ITEM_POINTS.fullmatch(c.value) and len(c.value) <= MAX_POINTS_CHARS for c in claims):
        return False  # a value that is no plain number ("7/10", "correct") tallies to nothing
    items = [Decimal(c.value) for c in claims]
    leading = next((i for i, item in enumerate(items) if item != total), len(items))
    if leading == len(items):
        return True  # the total, restated
    trailing = next(i for i, item in enumerate(reversed(items)) if item != total)
    # Exact arithmetic: enough digits for any values of MAX_POINTS_CHARS, an inexact step refused.
    with localcontext() as context:
        context.prec = 4 * MAX_POINTS_CHARS + len(str(len(items)))
        context.traps[Inexact] = True
        try:
            rest = sum(items) - total  # what is left beyond one total: k restatements of it
            if total == 0:
                return rest == 0
            restated, remainder = divmod(rest, total)
        except Inexact:
            return False
    return remainder == 0 and 0 <= restated <= leading + trailing


def _shorten(line: str, limit: int = 120) -> str:
    return line if len(line) <= limit else line[: limit - 3] + "..."
