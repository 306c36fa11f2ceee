"""Values fitted to what an Inspect log holds, and a note of every part that had to change.

A record's values come from the model (replies, tool-call arguments), the sandbox and the run
directory's files, which may have been edited. Inspect's writer refuses some of them: content
nested past pydantic-core's serialisation depth (about 250 levels for the whole sample) raised
``SampleSerializationError`` and stopped the whole export. Others it writes but changes without
saying so (NaN and infinities become ``null``). The export therefore passes every such value
through :class:`Fitter` before it reaches Inspect's types:

- text keeps every character JSON can hold; each lone surrogate is spelled ``\\uXXXX`` (the
  store's own rule, :mod:`proctor.agent.text.encodable`), and text past
  :data:`MAX_TEXT_CHARS` keeps its head and tail around a marker with its length and SHA-256;
- a structured value nested deeper than :data:`MAX_DEPTH`, or longer than
  :data:`MAX_TEXT_CHARS` as JSON, is replaced whole by a one-line summary (why, its size, the
  head of its JSON);
- a number JSON cannot spell (NaN, infinities) becomes its name as text; a dictionary key is
  text like any other, bounded by :data:`MAX_KEY_CHARS`.

Every change is noted (the record's field, why, the original size in characters); the export
puts the notes in the sample's metadata under ``proctor_export``. Nothing here imports
inspect_ai: the rules are Proctor's, checked in the calling process by the property tests.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any, cast

from proctor.agent.text.capped_text import capped
from proctor.agent.text.encodable import escape_unencodable

# Levels of containers one value may hold. Proctor's own records never go past 64
# (proctor.agent.text.encodable.MAX_DEPTH); Inspect places a value about ten levels down its
# sample (events -> model event -> input -> message -> tool call -> arguments), well within the
# writer's limit at any value this allows.
MAX_DEPTH = 64
# One text, or one value's JSON: a 10 MB reply (which the store keeps losslessly) passes whole;
# the viewer gives up on a sample past 512 MiB.
MAX_TEXT_CHARS = 16 * 1024 * 1024
MAX_KEY_CHARS = 1_000
# The head of a replaced value's JSON kept in its summary.
SUMMARY_HEAD_CHARS = 500
# Notes kept per sample; ``count`` covers them all.
MAX_NOTES = 50
_NAMED_FLOATS = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


class Fitter:
    """Fits one sample's values and keeps the notes of what changed."""

    def __init__(self) -> None:
        self.count = 0
        self.notes: list[dict[str, Any]] = []

    def note(self, field: str, reason: str, original_chars: int | None) -> None:
        self.count += 1
        if len(self.notes) < MAX_NOTES:
            self.notes.append(
                {"field": field or "(root)", "reason": reason, "original_chars": original_chars}
            )

    def report(self) -> dict[str, Any] | None:
        """What goes in the sample's metadata (``proctor_export``), or None when nothing changed."""
        if not self.count:
            return None
        return {"replaced": self.notes, "count": self.count}

    def text(self, value: str, field: str) -> str:
        return self._bounded(value, field, MAX_TEXT_CHARS, "longer than")

    def number(self, value: float | None, field: str) -> float | None:
        """A typed number of Inspect's (times, points): one JSON cannot spell is left unset."""
        if value is None or math.isfinite(value):
            return value
        self.note(field, f"{value} is not a JSON number; left unset", None)
        return None

    def value(self, value: Any, field: str) -> Any:
        """A JSON value Inspect writes and reads back unchanged, or a summary in its place."""
        depth, chars = measure(value)
        if depth > MAX_DEPTH:
            return self.summary(
                value, field, f"nested {depth} levels deep (at most {MAX_DEPTH} are kept)", chars
            )
        if chars > MAX_TEXT_CHARS:
            return self.summary(
                value, field, f"{chars:,} characters of JSON (at most {MAX_TEXT_CHARS:,})", chars
            )
        return self._clean(value, field)

    def summary(self, value: Any, field: str, reason: str, chars: int) -> str:
        self.note(field, reason, chars)
        head = "".join(_take(json_tokens(value), SUMMARY_HEAD_CHARS))
        head, _ = escape_unencodable(head[:SUMMARY_HEAD_CHARS])
        return f"[replaced by proctor export: {reason}; {chars:,} characters of JSON, beginning: {head}]"

    def _clean(self, value: Any, field: str) -> Any:
        if isinstance(value, str):
            return self.text(value, field)
        if isinstance(value, bool) or value is None or isinstance(value, int):
            return value
        if isinstance(value, float):
            if math.isfinite(value):
                return value
            name = _NAMED_FLOATS["nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")]
            self.note(field, f"{name} is not a JSON number; kept as the text {name!r}", None)
            return name
        if isinstance(value, list | tuple):
            return [self._clean(item, f"{field}.{index}") for index, item in enumerate(value)]
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for key, item in value.items():
                name = self.key(key, field)
                if name in out:
                    # Two keys that differed only in what had to be escaped or cut: keep both.
                    taken = name
                    name = next(
                        f"{taken} ({n})" for n in range(2, len(value) + 2) if f"{taken} ({n})" not in out
                    )
                    self.note(
                        f"{field}.<key>" if field else "<key>",
                        f"renamed {name!r}: the same as another key once fitted",
                        None,
                    )
                out[name] = self._clean(item, f"{field}.{name}" if field else name)
            return out
        # Not JSON data (a record holds none; a caller's mistake): its repr, as text.
        return self.text(repr(value), field)

    def key(self, key: Any, field: str) -> str:
        text = key if isinstance(key, str) else str(key)
        return self._bounded(text, f"{field}.<key>" if field else "<key>", MAX_KEY_CHARS, "a key longer than")

    def _bounded(self, text: str, where: str, limit: int, too_long: str) -> str:
        """``text`` with lone surrogates spelled out and, past ``limit``, its head and tail kept;
        each change noted at ``where``."""
        fixed, surrogates = escape_unencodable(text)
        if surrogates:
            self.note(where, f"{surrogates} lone surrogate(s) spelled \\uXXXX", len(text))
        if len(fixed) > limit:
            self.note(where, f"{too_long} {limit:,} characters; head and tail kept", len(text))
            fixed = capped(fixed, limit)
        return fixed


def measure(value: Any) -> tuple[int, int]:
    """(levels of containers, characters of ``json.dumps(value)``), without recursion: a value
    parsed from a model's tool-call arguments may be nested far past Python's recursion limit."""
    depth = 0
    chars = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            depth = max(depth, level + 1)
            chars += 2 + 2 * max(len(item) - 1, 0)
            for key, child in item.items():
                chars += _scalar_chars(key if isinstance(key, str) else str(key)) + 2
                stack.append((child, level + 1))
        elif isinstance(item, list | tuple):
            depth = max(depth, level + 1)
            chars += 2 + 2 * max(len(item) - 1, 0)
            stack.extend((child, level + 1) for child in item)
        else:
            chars += _scalar_chars(item)
    return depth, chars


def _scalar_chars(value: Any) -> int:
    if isinstance(value, str):
        return len(json.dumps(value))
    if isinstance(value, bool) or value is None:
        return 4 if value is not False else 5
    if isinstance(value, int | float):
        return len(json.dumps(value))
    return len(repr(value))


def json_tokens(value: Any) -> Iterator[str]:
    """``json.dumps(value)`` in pieces, lazily and without recursion (for the head of a value
    nested past Python's recursion limit, or with millions of items)."""
    # Each open container: its remaining items, its closing bracket, whether it is an object,
    # and whether an item was written yet.
    stack: list[tuple[Iterator[Any], str, bool, list[bool]]] = []
    item, ready = value, True
    while True:
        if ready:
            if isinstance(item, dict):
                yield "{"
                stack.append((iter(item.items()), "}", True, [False]))
            elif isinstance(item, list | tuple):
                yield "["
                stack.append((iter(item), "]", False, [False]))
            else:
                yield _scalar_json(item)
            ready = False
        if not stack:
            return
        items, closing, is_object, written = stack[-1]
        following = next(items, _END)
        if following is _END:
            stack.pop()
            yield closing
            continue
        if written[0]:
            yield ", "
        written[0] = True
        if is_object:
            key, item = cast(tuple[Any, Any], following)
            yield json.dumps(key if isinstance(key, str) else str(key)) + ": "
        else:
            item = following
        ready = True


_END = object()


def _scalar_json(value: Any) -> str:
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return json.dumps(repr(value))


def _take(tokens: Iterator[str], limit: int) -> Iterator[str]:
    taken = 0
    for token in tokens:
        yield token
        taken += len(token)
        if taken >= limit:
            return
