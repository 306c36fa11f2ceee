"""Deterministic pre-check: settle clear Olympiad cases as CORRECT without asking the judge.

Policy (see docs/judge-tracks.md): the pre-check only ever says "correct, sure" or "not sure".
It never settles INCORRECT: a string or number mismatch can still be an equivalent answer
(another unit, a compound's other name, a rearranged expression), which only the judge can see.

It settles only answers of a few whitelisted shapes, so an answer that names several candidates
("3 or 4", "5 (or 6)", ``\\pm``, a list, a range, ``3 or 4 = 5``) never reaches a comparison
that could keep just one of them. After normalisation the answer must be:

* ``exact``: the reference's own text (or the reference's value when the reference is
  ``name = value``): whatever the answer says, the reference says too; or
* ``numeric``: one plain number in a strict grammar (ASCII digits, one optional sign, decimal
  point, ``\\times 10^{k}`` or ``e k`` with ``|k| < 1000``, at most 40 mantissa characters)
  followed by exactly the reference's unit text. An integer reference needs the same value.
  Otherwise the prompt's "within 1 decimal place rounding (e.g., 6.69 ≈ 6.7)" is read
  conservatively: the two must agree both when rounded to one decimal place and when rounded to
  one decimal place of the reference's leading digit, so 0.046 may match 0.0456 but 0.04 may not;
* either of those behind one ``NAME =``, where NAME is a bare name (``T``, ``R_{eq}``,
  ``\\Delta S``, ``y(x)``: :func:`proctor.agent.text.answer_shape.is_bare_name`) and there is one ``=``.

Anything else, including every answer longer than ``MAX_ANSWER_CHARS``, defers to the judge.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation, localcontext

from proctor.agent.text.answer_shape import is_bare_name

# Bounds on the work one pre-check may do. Longer answers are not "one committed value" anyway.
MAX_ANSWER_CHARS = 2_000
MAX_REFERENCE_CHARS = 20_000
MAX_MANTISSA_CHARS = 40


@dataclass(frozen=True)
class PrecheckResult:
    settled_correct: bool
    rule: str  # the rule that settled it, or why the judge must decide

    def describe(self) -> str:
        return ("settled correct by " if self.settled_correct else "deferred to judge: ") + self.rule


_BACKSLASH_RUN = re.compile(r"\\{2,}")
_DELIMITERS = re.compile(r"\\[()\[\]]|\$")
_SIZING = re.compile(r"\\(?:left|right|[bB]ig{1,2}[lr]?|displaystyle)(?![A-Za-z])")
# "~" between two things is TeX's unbreakable space; a leading "~5" means "about 5" and stays.
_THIN_SPACES = re.compile(r"\\[,;:! ]|(?<=\S)~")
_SINGLE_GROUP = re.compile(r"([\^_])\{([A-Za-z0-9])\}")
_SPACE_RUN = re.compile(r"\s+")
# TeX ends a control word at the first non-letter, so "\times 10" is "\times10".
_SPACE_AFTER_COMMAND = re.compile(r"(\\[A-Za-z]+) (?![A-Za-z])")
# A space matters only between two word characters ("\cos x", "sodium nitrate").
_INSIGNIFICANT_SPACE = re.compile(r"(?<!\w) | (?!\w)")
_TRAILING_PUNCTUATION = ".,;，。"
_TEXT_WRAPPERS = re.compile(r"\\(?:text|mathrm|rm|textrm|mbox|operatorname)\s*\{([^{}]*)\}")


def normalize_answer(text: str) -> str:
    """Canonical spelling of an answer string, for comparisons that must not overreach."""
    text = html.unescape(text)
    text = _BACKSLASH_RUN.sub(r"\\", text)  # answers escaped twice: "\\frac" -> "\frac"
    text = text.replace("`", "")
    text = _DELIMITERS.sub(" ", text)
    text = _SIZING.sub("", text)
    text = _THIN_SPACES.sub(" ", text)
    text = text.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    text = text.replace("\\-", "-").replace("\\_", "_").replace("−", "-")
    text = _SINGLE_GROUP.sub(r"\1\2", text)
    text = _SPACE_RUN.sub(" ", text).strip()
    text = _SPACE_AFTER_COMMAND.sub(r"\1", text)
    text = _INSIGNIFICANT_SPACE.sub("", text).strip()
    # One closing full stop or comma is punctuation; "5..." or "5,," is not a plain "5".
    if text[-1:] and text[-1] in _TRAILING_PUNCTUATION:
        text = text[:-1]
    return text.strip()


def split_assignment(text: str) -> tuple[str | None, str] | None:
    """``"r=19"`` -> ``("r", "19")``; ``"19"`` -> ``(None, "19")``; None when it is neither.

    Only a bare name (:func:`proctor.agent.text.answer_shape.is_bare_name`) before the only ``=`` makes an
    assignment. ``3 or 4 = 5``, ``a = b = c`` and ``x + y = 5`` are not committed values.
    """
    if "=" not in text:
        return None, text
    if text.count("=") != 1:
        return None
    lhs, rhs = (part.strip() for part in text.split("="))
    if not rhs or not is_bare_name(lhs):
        return None
    return lhs, rhs


_NUMBER = re.compile(
    r"(?P<mantissa>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?:\\times|\\cdot|×|\*)10\^(?:\{(?P<braced>[+-]?[0-9]{1,3})\}|(?P<power>[+-]?[0-9]))"
    r"|[eE](?P<exp>[+-]?[0-9]{1,3})(?![0-9]))?"
    r"(?P<unit>.*)",
    re.DOTALL,
)
_UNIT = re.compile(r"[A-Za-zμµ°%/^{}\-0-9·.]*")


@dataclass(frozen=True)
class ParsedNumber:
    value: Decimal
    unit: str
    integer_literal: bool


def parse_number(text: str) -> ParsedNumber | None:
    """One number in the strict grammar (module docstring) and its unit text, or None."""
    match = _NUMBER.fullmatch(text)
    if match is None:
        return None
    mantissa = match.group("mantissa")
    if len(mantissa) > MAX_MANTISSA_CHARS:
        return None
    unit = _TEXT_WRAPPERS.sub(r"\1", match.group("unit")).replace(" ", "")
    if not _UNIT.fullmatch(unit) or (unit and (unit[0].isdigit() or unit[0] in ".-^{}/")):
        return None
    exponent = match.group("braced") or match.group("power") or match.group("exp")
    try:
        value = Decimal(mantissa) * (Decimal(10) ** int(exponent) if exponent else 1)
    except InvalidOperation:
        return None
    integer_literal = exponent is None and "." not in mantissa
    return ParsedNumber(value=value, unit=unit.rstrip("."), integer_literal=integer_literal)


_TENTH = Decimal("0.1")


def _round_tenth(value: Decimal) -> Decimal:
    return value.quantize(_TENTH, rounding=ROUND_HALF_UP)


def numbers_match(reference: ParsedNumber, answer: ParsedNumber) -> bool:
    # Mantissas have at most 40 characters and exponents three digits, so a tenth of any value
    # fits in 1100 digits; the context has room to spare and quantize can never overflow it.
    with localcontext() as context:
        context.prec = 2100
        try:
            return _numbers_match(reference, answer)
        except InvalidOperation:  # a reference outside the grammar's bounds: not sure
            return False


def _numbers_match(reference: ParsedNumber, answer: ParsedNumber) -> bool:
    if reference.unit != answer.unit:
        return False
    if reference.integer_literal or reference.value == 0:
        return reference.value == answer.value
    if (reference.value > 0) != (answer.value > 0):
        return False
    scale = Decimal(10) ** reference.value.copy_abs().adjusted()
    return _round_tenth(reference.value) == _round_tenth(answer.value) and _round_tenth(
        reference.value / scale
    ) == _round_tenth(answer.value / scale)


def precheck(reference: str, answer: str | None) -> PrecheckResult:
    """Decide CORRECT when sure; otherwise say why the judge has to decide."""
    if answer is None or not answer.strip():
        return PrecheckResult(False, "no marked final answer to compare")
    if len(answer) > MAX_ANSWER_CHARS or len(reference) > MAX_REFERENCE_CHARS:
        return PrecheckResult(False, f"answer longer than {MAX_ANSWER_CHARS} characters")
    ref_norm, ans_norm = normalize_answer(reference), normalize_answer(answer)
    if not ref_norm or not ans_norm:
        return PrecheckResult(False, "empty after normalisation")
    if ref_norm == ans_norm:
        return PrecheckResult(True, "exact")
    answer_parts = split_assignment(ans_norm)
    if answer_parts is None:
        return PrecheckResult(
            False, "the answer is not one committed value (an = that is not `name = value`)"
        )
    ans_name, ans_value = answer_parts
    ref_name, ref_value = split_assignment(ref_norm) or (None, ref_norm)
    if ans_name is not None and ref_name is not None and ans_name != ref_name:
        return PrecheckResult(False, "the answer names another quantity than the reference")
    if ans_value in (ref_value, ref_norm):
        return PrecheckResult(True, "exact")
    ans_number = parse_number(ans_value)
    if ans_number is not None:
        for ref_text in dict.fromkeys((ref_value, ref_norm)):
            ref_number = parse_number(ref_text)
            if ref_number is not None and numbers_match(ref_number, ans_number):
                return PrecheckResult(True, "numeric")
    return PrecheckResult(False, "no exact or numeric match")
