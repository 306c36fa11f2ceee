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

Both sides are compared as skeletons (``agent/judge/lookalike.py``: case, full-width and
look-alike letters, zero-width characters) with whitespace runs collapsed and no space before a
colon. The answer is split into lines at every Unicode line boundary (``str.splitlines``): here
the question is what a reader, or the judge, may *see* as a new line.
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
_LEADING = re.compile(r"^(?:[\W_]|\d+[.)])*")


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
    text = " ".join(skeleton(text).split())
    return text.replace(" :", ":")


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
def _compiled(template: str) -> list[tuple[str, re.Pattern[str], bool]]:
    """(marker, pattern on a comparable line, whether it must start the line once markup is gone)."""
    markers = section_markers(template)
    patterns: list[tuple[str, re.Pattern[str], bool]] = []
    for separator in markers.separators:
        form = _comparable(separator)
        if not form:  # a token of characters the skeleton deletes: nothing to look for
            continue
        # A run of one character also matches longer runs of it ("*****" for "***").
        body = f"{re.escape(form[0])}{{{len(form)},}}" if len(set(form)) == 1 else re.escape(form)
        patterns.append((separator, re.compile(rf"(?<!\S){body}(?!\S)"), False))
    for label in markers.labels:
        if form := _comparable(_MARKUP.sub("", label)):
            patterns.append((label, re.compile(re.escape(form)), True))
    for keyword in markers.keywords:
        patterns.append((keyword, re.compile(re.escape(_comparable(keyword))), False))
    return patterns


def prompt_section_matches(template: str, answer: str | None) -> list[SectionMatch]:
    """Lines of ``answer`` that imitate ``template``'s separators, labels or keywords."""
    if not answer:
        return []
    patterns = _compiled(template)
    found: list[SectionMatch] = []
    seen: set[tuple[str, str]] = set()
    for line in answer.splitlines():
        if not line.strip():
            continue
        comparable = _comparable(line)
        plain = _comparable(_LEADING.sub("", _MARKUP.sub("", comparable)))
        for marker, pattern, at_start in patterns:
            hit = pattern.match(plain) if at_start else pattern.search(comparable)
            if hit is None:
                continue
            shown = line.strip()
            shown = shown if len(shown) <= MAX_MATCH_CHARS else shown[: MAX_MATCH_CHARS - 3] + "..."
            if (marker, shown) not in seen:
                seen.add((marker, shown))
                found.append(SectionMatch(marker, shown))
                if len(found) >= MAX_MATCHES:
                    return found
    return found
