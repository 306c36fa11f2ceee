"""Readings of a hedged answer, for EED's fixed mode.

A hedged answer names several candidates: ``a \\pm b``, ``\\boxed{a} \\boxed{b}``, ``a = b`` with
two different sides, ``a \\text{ or } b``, ``a, b``, ``(a, b)``. The published scorer keeps one
of them (``\\pm`` becomes ``+``, relations keep their last side), so a hedge can score 100.
Fixed mode scores every reading and keeps the worst: an answer that covers itself with two
candidates is worth what its wrong candidate is worth.

Readings are found by string work alone, before any conversion:

1. several different ``\\boxed{}`` contents: each one;
2. top-level alternatives: ``,``, ``;``, ``\\text{or}``/``\\text{and}`` (and ``\\mathrm``,
   ``\\textrm``), a bare ``or``/``and`` between spaces, ``\\lor``, ``\\vee``; a whole answer
   that is a bracketed list ``(a, b)``, ``[a, b]``, ``\\{a, b\\}`` gives its elements;
3. text after ``\\quad`` that is more than a remark or a condition: no relation, and something
   left once ``\\text{...}``, brackets and punctuation are gone (``a \\quad (b)``);
4. top-level relations (``=``, ``\\approx``, ``<``, ``\\le``, ...): every side is a reading, except
   a leading bare name before ``=`` or ``\\approx`` (``v_0 = ...`` states a value);
5. ``\\pm``/``\\mp``/``±``/``∓`` in either string: the upper and the lower sign reading, paired
   with the same reading of the reference.

An answer with one reading is not hedged and is scored exactly as before.
"""

from __future__ import annotations

import re

from proctor.agent.text.answer_shape import boxed_contents, distinct, is_bare_name

MAX_READINGS = 8
# A whole string this long is not split: the length gate scores such answers 0 anyway.
MAX_SCAN_CHARS = 20_000

_WORD_ALTERNATIVE = re.compile(
    r"\\(?:text|mathrm|textrm|mbox|rm)\s*\{\s*(?:or|and|either|else|otherwise|maybe)\s*\}"
    r"|(?:(?<=\s)|^)(?:or|and)(?=\s|$)"
    r"|\\(?:lor|vee|lor)(?![A-Za-z])"
)
_RELATION = re.compile(
    r"\\(?:approx|simeq|equiv|sim|leq|le|geq|ge|neq|ne|lt|gt|leqslant|geqslant)(?![A-Za-z])|[=<>≈≤≥≠]"
)
_VALUE_RELATION = re.compile(r"=|\\approx(?![A-Za-z])|≈")
_PLUS_MINUS = re.compile(r"\\pm(?![A-Za-z])|±")
_MINUS_PLUS = re.compile(r"\\mp(?![A-Za-z])|∓")
_SEPARATOR = "\x00"
_QUAD = re.compile(r"\\q?quad(?![A-Za-z])")
_QUAD_REMARK = re.compile(
    r"\\(?:text|mathrm|textrm|mbox|rm)\s*\{[^{}]*\}|\\[,;:! ]|\\q?quad(?![A-Za-z])|[\s()\[\].,;:]"
)
_BOX_ONLY = re.compile(r"\s*\\boxed\s*\{.*\}\s*", re.DOTALL)
_OPENING = "([{"
_CLOSING = ")]}"


def _top_level_split(text: str, separators: str) -> list[str]:
    """Split at characters of ``separators`` that stand outside every (), [] and {} group."""
    parts: list[str] = []
    depth = 0
    start = 0
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text) and text[index + 1] in "{}":
            index += 2  # \{ and \} are set braces, not groups
            continue
        if char in _OPENING:
            depth += 1
        elif char in _CLOSING:
            depth = max(0, depth - 1)
        elif depth == 0 and char in separators:
            parts.append(text[start:index])
            start = index + 1
        index += 1
    parts.append(text[start:])
    return parts


_SIZING = re.compile(r"\\(?:left|right|[bB]ig{1,2}[lr]?)(?![A-Za-z])")


def _list_elements(text: str) -> list[str] | None:
    """``(a, b)`` or ``[a; b]``: the elements, when one bracket pair encloses the whole answer."""
    stripped = _SIZING.sub("", text).strip()
    if not stripped or stripped[0] not in "([":
        return None
    depth = 0
    for index, char in enumerate(stripped):
        if char in _OPENING:
            depth += 1
        elif char in _CLOSING:
            depth -= 1
            if depth == 0:
                if index != len(stripped) - 1:
                    return None  # "(a)(b, c)": the first group ends early
                elements = _top_level_split(stripped[1:index], ",;")
                return elements if len(elements) > 1 else None
    return None


def _strip_enclosing_braces(text: str) -> str:
    """``{a = b}`` -> ``a = b``: fixed mode's preprocessing unwraps such braces before slicing."""
    for _ in range(32):
        stripped = text.strip()
        if not (stripped.startswith("{") and stripped.endswith("}")):
            return text
        depth = 0
        for index, char in enumerate(stripped):
            if char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
                if depth == 0 and index != len(stripped) - 1:
                    return text  # "{a}{b}": the first group closes early
        text = stripped[1:-1]
    return text


def has_nested_comma(text: str) -> bool:
    """A comma inside a group that is not a function's argument list: ``\\frac{a, b}{c}``, ``{a, 1}``.

    The preprocessing deletes commas, so ``\\frac{r, 1}{1}`` would become ``r·1``; there is no
    sensible reading of it. ``f(x, y)`` and ``\\max(a, b)`` keep their commas.
    """
    call_stack: list[bool] = []  # per open group: is it a function's argument list?
    for index, char in enumerate(text):
        if char in _OPENING:
            call_stack.append(char == "(" and index > 0 and text[index - 1].isalpha())
        elif char in _CLOSING:
            if call_stack:
                call_stack.pop()
        elif char == "," and call_stack and not call_stack[-1]:
            return True
    return False


def _alternatives(text: str) -> list[str]:
    marked = _WORD_ALTERNATIVE.sub(_SEPARATOR, text)
    parts = _top_level_split(marked, "," + ";" + _SEPARATOR)
    if len(parts) == 1:
        elements = _list_elements(text)
        if elements is not None:
            return elements
    return parts


def _quad_parts(text: str) -> list[str]:
    """``a \\quad (b)``: the published scorer drops everything after ``\\quad``, which is right for
    a unit, a remark or a condition (``\\quad \\text{(m/s)}``, ``\\quad x > 0``) but hides a second
    value. A tail without a relation that still holds something once text groups, brackets and
    punctuation are gone is a reading of its own."""
    match = _QUAD.search(text)
    if match is None:
        return [text]
    head, tail = text[: match.start()], text[match.end() :]
    if _RELATION.search(tail) or not _QUAD_REMARK.sub("", tail).strip():
        return [head]  # a condition ("\\quad x > 0") or a remark: dropped, as published
    return [head, *_quad_parts(tail)]


def _relation_sides(text: str) -> list[str]:
    """Sides of the top-level relations; a leading ``name =`` or ``name \\approx`` is dropped."""
    marked = _RELATION.sub(lambda match: _SEPARATOR + match.group(0) + _SEPARATOR, text)
    pieces = _top_level_split(marked, _SEPARATOR)
    if len(pieces) == 1:
        return [text]
    sides = pieces[0::2]
    relations = pieces[1::2]
    if len(sides) != len(relations) + 1:  # a relation inside a group: leave the text as it is
        return [text]
    if is_bare_name(sides[0]) and _VALUE_RELATION.fullmatch(relations[0]):
        sides = sides[1:]
    return sides


def _signs(text: str) -> tuple[str, str]:
    upper = _MINUS_PLUS.sub("-", _PLUS_MINUS.sub("+", text))
    lower = _MINUS_PLUS.sub("+", _PLUS_MINUS.sub("-", text))
    return upper, lower


def answer_readings(answer: str) -> list[str] | None:
    """The distinct single-valued readings of ``answer``.

    None when there is no sensible set of readings: more than ``MAX_READINGS``, or a comma inside
    a group (:func:`has_nested_comma`).
    """
    if len(answer) > MAX_SCAN_CHARS:
        return [answer]
    boxes = boxed_contents(answer, limit=4 * MAX_READINGS + 1)
    if len(boxes) > 4 * MAX_READINGS:
        return None  # the scan stopped before the last box: readings past it would go unscored
    only_boxes = len(boxes) > 1 or (len(boxes) == 1 and _BOX_ONLY.fullmatch(answer) is not None)
    candidates = distinct(boxes) if only_boxes else [answer]
    readings: list[str] = []
    for candidate in candidates:
        for alternative in _alternatives(_strip_enclosing_braces(candidate)):
            for part in _quad_parts(alternative):
                readings.extend(_relation_sides(_strip_enclosing_braces(part)))
    readings = [reading for reading in distinct(readings) if reading]
    if not readings:
        return [answer]  # only separators (",", "=", "or"): nothing to split, scored as written
    if len(readings) > MAX_READINGS or any(has_nested_comma(reading) for reading in readings):
        return None
    return readings


def scoring_pairs(reference: str, answer: str) -> list[tuple[str, str]] | None:
    """(reference, answer) pairs fixed mode scores, the worst counting; None: too many readings.

    ``[(reference, answer)]`` when the answer is not hedged.
    """
    readings = answer_readings(answer)
    if readings is None:
        return None
    if len(readings) == 1 and len(boxed_contents(answer, limit=2)) < 2:
        readings = [answer]  # one value (perhaps behind "name ="): the published path takes it
    pairs: list[tuple[str, str]] = []
    for reading in readings:
        if _PLUS_MINUS.search(reading + reference) or _MINUS_PLUS.search(reading + reference):
            # The upper reading of the answer goes with the upper reading of the reference.
            pairs.extend(zip(_signs(reference), _signs(reading), strict=True))
        else:
            pairs.append((reference, reading))
    pairs = list(dict.fromkeys(pairs))
    return pairs if len(pairs) <= MAX_READINGS else None
