"""Deterministic pre-check: settle clear Olympiad cases as CORRECT without asking the judge.

Policy (see docs/judge-tracks.md): the pre-check only ever says "correct, sure" or "not sure".
It never settles INCORRECT: a string or number mismatch can still be an equivalent answer
(another unit, a compound's other name, a rearranged expression), which only the judge can see.

Rules, tried in order on the normalised reference and answer:

1. ``exact``: equal strings after normalisation (markup, delimiters, spacing, double escapes).
   A lone ``x = ...`` on one side is compared by its right-hand side.
2. ``numeric``: both are one number (optionally times a power of ten) followed by the same
   unit text. An integer reference needs the same value. Otherwise the prompt's
   "within 1 decimal place rounding (e.g., 6.69 ≈ 6.7)" is read conservatively: the two must
   agree both when rounded to one decimal place and when rounded to one decimal place of the
   reference's leading digit (scientific notation), so 0.046 may match 0.0456 but 0.04 may not.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation, localcontext


@dataclass(frozen=True)
class PrecheckResult:
    settled_correct: bool
    rule: str  # the rule that settled it, or why the judge must decide

    def describe(self) -> str:
        return ("settled correct by " if self.settled_correct else "deferred to judge: ") + self.rule


_BACKSLASH_RUN = re.compile(r"\\{2,}")
_DELIMITERS = re.compile(r"\\[()\[\]]|\$")
_SIZING = re.compile(r"\\(?:left|right|[bB]ig{1,2}[lr]?|displaystyle)(?![A-Za-z])")
_THIN_SPACES = re.compile(r"\\[,;:! ]|~")
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
    text = _INSIGNIFICANT_SPACE.sub("", text)
    return text.strip().rstrip(_TRAILING_PUNCTUATION).strip()


def split_assignment(text: str) -> tuple[str | None, str]:
    """``"r=19"`` -> ``("r", "19")``; text without exactly one ``=`` has no left-hand side."""
    if text.count("=") != 1:
        return None, text
    lhs, rhs = (part.strip() for part in text.split("="))
    if not lhs or not rhs or len(lhs) > 40:
        return None, text
    return lhs, rhs


_NUMBER = re.compile(
    r"(?P<mantissa>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?:(?:\\times|\\cdot|×|\*)10\^\{?(?P<power>[+-]?\d{1,3})\}?|[eE](?P<exp>[+-]?\d{1,3}))?"
    r"(?P<unit>.*)"
)


@dataclass(frozen=True)
class ParsedNumber:
    value: Decimal
    unit: str
    integer_literal: bool


def parse_number(text: str) -> ParsedNumber | None:
    match = _NUMBER.fullmatch(text)
    if match is None:
        return None
    unit = _TEXT_WRAPPERS.sub(r"\1", match.group("unit")).replace(" ", "")
    if (unit and not re.fullmatch(r"[A-Za-zμµ°%/^{}\-0-9·.]*", unit)) or unit[:1].isdigit():
        return None
    mantissa = match.group("mantissa")
    exponent = match.group("power") or match.group("exp")
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
    # Exponents have at most three digits, so rounding 1e999 to a tenth needs ~1000 digits.
    with localcontext() as context:
        context.prec = 2100
        return _numbers_match(reference, answer)


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


def _sides_to_compare(reference: str, answer: str) -> list[tuple[str, str]]:
    """The pairs worth comparing: whole strings, or right-hand sides when one side names its LHS."""
    pairs = [(reference, answer)]
    ref_lhs, ref_rhs = split_assignment(reference)
    ans_lhs, ans_rhs = split_assignment(answer)
    if ref_lhs is not None and ans_lhs is None:
        pairs.append((ref_rhs, answer))
    elif ans_lhs is not None and ref_lhs is None:
        pairs.append((reference, ans_rhs))
    elif ref_lhs is not None and ref_lhs == ans_lhs:
        pairs.append((ref_rhs, ans_rhs))
    return pairs


def precheck(reference: str, answer: str | None) -> PrecheckResult:
    """Decide CORRECT when sure; otherwise say why the judge has to decide."""
    if answer is None or not answer.strip():
        return PrecheckResult(False, "no marked final answer to compare")
    ref_norm, ans_norm = normalize_answer(reference), normalize_answer(answer)
    if not ref_norm or not ans_norm:
        return PrecheckResult(False, "empty after normalisation")
    pairs = _sides_to_compare(ref_norm, ans_norm)
    if any(ref == ans for ref, ans in pairs):
        return PrecheckResult(True, "exact")
    for ref, ans in pairs:
        ref_number, ans_number = parse_number(ref), parse_number(ans)
        if ref_number is not None and ans_number is not None and numbers_match(ref_number, ans_number):
            return PrecheckResult(True, "numeric")
    return PrecheckResult(False, "no exact or numeric match")
