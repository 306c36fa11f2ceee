"""Spotting a candidate answer that mimics the judge prompt's own sections.

The judge prompts stay verbatim (the paper's appendix B), so the answer reaches the judge
between the prompt's own ``***`` separators and labels. An answer that brings its own
separators and a second "The reference answer:" block can pass for part of the prompt. Grading
does not change for it (the judge decides); the sample is flagged so an auditor can look
(``answer_mimics_prompt_sections`` with the matched lines, counted in the summary, flagged in
the report).

The markers are derived from the template actually used, so an edited template stays covered:

* **separators**: every whitespace-delimited token of the template without a letter or digit,
  at least three characters long (``***``). An answer matches one when a run of at least as
  many of the same character stands alone between whitespace or line ends (``***``, ``*****``;
  not the emphasis in ``***bold***``);
* **labels**: the text before each ``{placeholder}`` on its line (``The problem:``,
  ``The reference answer:``, ``The attempted answer:``, ``The rubric:``); an answer matches
  one when a line starts with it, after markup (``**``, ``#``, ``>``, list marks);
* **keywords**: upper-case words followed by a colon (``VERDICT:``, the answer format the
  judge is told to write); an answer matches one anywhere in a line.

The answer is compared as a skeleton (``agent/judge/lookalike.py``: case, full-width and
look-alike letters, zero-width characters), with any spacing or markup allowed between a
marker's words and before its colon. Its lines end at every character ``str.splitlines``
breaks at: here the question is what a reader, or the judge, may *see* as a new line.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from proctor.agent.judge.lookalike import skeleton

# Enough to show an auditor the pattern; a hostile answer may repeat a marker a million times.
MAX_MATCHES = 20
MAX_MATCH_CHARS = 200

_PLACEHOLDER = re.compile(r"\{[^{}\n]+\}")
_KEYWORD = re.compile(r"\b[A-Z]{3,}(?: [A-Z]{3,})*:")
_MARKUP = re.compile(r"[*_`~#>|]+")
# Every character str.splitlines() breaks a line at, as "\n" (a reader may see each as a break).
# (A regex, not str.translate: translate with a mapping is slow on non-ASCII text.)
_BREAKS = re.compile("[\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
# Spacing or markup inside a line, where a marker has one space (or none, before a colon).
_GAPS = r"(?:[^\S\n]|[*_`~#>|])*:"
_GAPS_REQUIRED = r"(?:[^\S\n]|[*_`~#>|])+"
# Markup and list numbering before a label at a line's start: "> ## 1. The problem:". No part
# matches "\n" or a letter, so each line start scans only its own leading punctuation.
_LINE_START = r"^[^\w\n]*(?:\d+[.)][^\w\n]*)*"
_MAX_RAW_MATCHES = 10_000


@dataclass(frozen=True)
class SectionMarkers:
    separators: tuple[str, ...]
    labels: tuple[str, ...]
    keywords: tuple[str, ...]


@dataclass(frozen=True)
class SectionMatch:
    marker: str  # the template's text that was imitated
    text: str  # the answer's line that imitates it (at most MAX_MATCH_CHARS)


def _comparable(text: str) -> str:
    """A marker's skeleton, words split by single spaces (markers are short: Python is fine)."""
    return " ".join(_MARKUP.sub(" ", skeleton(text)).split())


def _tolerant(form: str) -> str:
    """A regex for a comparable marker: any spacing or markup between words and before ':'."""
    words = [_GAPS.join(map(re.escape, word.split(":"))) for word in form.split(" ")]
    return _GAPS_REQUIRED.join(words)


@functools.lru_cache(maxsize=16)
def section_markers(template: str) -> SectionMarkers:
    separators: dict[str, None] = {}
    labels: dict[str, None] = {}
    keywords: dict[str, None] = {}
    for line in template.split("\n"):
        for token in line.split():
            if len(token) >= 3 and not any(char.isalnum() for char in token):
                separators.setdefault(token)
        for placeholder in _PLACEHOLDER.finditer(line):
            label = line[: placeholder.start()].strip()
            if any(char.isalpha() for char in label):
                labels.setdefault(label)
        for keyword in _KEYWORD.finditer(line):
            keywords.setdefault(keyword.group(0))
    return SectionMarkers(tuple(separators), tuple(labels), tuple(keywords))


@functools.lru_cache(maxsize=16)
def _compiled(template: str) -> list[tuple[str, str, re.Pattern[str]]]:
    """(marker, a literal every hit contains, the pattern on the answer's skeleton)."""
    markers = section_markers(template)
    patterns: list[tuple[str, str, re.Pattern[str]]] = []
    for separator in markers.separators:
        form = "".join(skeleton(separator).split())
        if not form:  # a token of characters the skeleton deletes: nothing to look for
            continue
        # A run of one character also matches longer runs of it ("*****" for "***").
        body = f"{re.escape(form[0])}{{{len(form)},}}" if len(set(form)) == 1 else re.escape(form)
        patterns.append((separator, form, re.compile(rf"(?<!\S){body}(?!\S)")))
    for label in markers.labels:
        if form := _comparable(label):
            pattern = re.compile(_LINE_START + _tolerant(form), re.MULTILINE)
            patterns.append((label, _longest_word(form), pattern))
    for keyword in markers.keywords:
        if form := _comparable(keyword):
            patterns.append((keyword, _longest_word(form), re.compile(_tolerant(form))))
    return patterns


def _longest_word(form: str) -> str:
    return max(re.split(r"[\W_]+", form), key=len)


def prompt_section_matches(template: str, answer: str | None) -> list[SectionMatch]:
    """Lines of ``answer`` that imitate ``template``'s separators, labels or keywords.

    One skeleton of the whole answer and a regex pass per marker whose longest word occurs at
    all, not a Python loop over lines: a million-line answer costs a few passes over its text.
    """
    if not answer:
        return []
    broken = _BREAKS.sub("\n", answer)
    shown_lines = broken.split("\n")
    text = skeleton(broken)
    hits: dict[tuple[str, str], int] = {}
    for order, (marker, literal, pattern) in enumerate(_compiled(template)):
        if literal not in text:  # a substring search first: most answers hold no marker at all
            continue
        line, position, distinct = 0, 0, 0
        for raw, hit in enumerate(pattern.finditer(text)):
            if distinct >= MAX_MATCHES or raw >= _MAX_RAW_MATCHES:
                break
            line += text.count("\n", position, hit.start())
            position = hit.start()
            shown = shown_lines[line].strip()
            shown = shown if len(shown) <= MAX_MATCH_CHARS else shown[: MAX_MATCH_CHARS - 3] + "..."
            if (marker, shown) not in hits:
                hits[(marker, shown)] = line * 1000 + order
                distinct += 1
    ordered = sorted(hits, key=hits.__getitem__)[:MAX_MATCHES]
    return [SectionMatch(marker, shown) for marker, shown in ordered]
