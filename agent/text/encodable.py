"""Make any text a model sends storable as UTF-8 JSON, and say what had to change.

Python strings may hold code points UTF-8 cannot encode: lone UTF-16 surrogates
(U+D800..U+DFFF), which a model produces with a JSON escape such as ``"\\ud800"``. The
store's JSON writer refuses them, and the JSON reader refuses their escaped form, so a record
holding one could be neither written nor read back. The replacement rule (documented in
docs/runs.md) is: each such code point becomes the six characters ``\\uXXXX`` (its value in
lowercase hex, the way JSON and Python spell it), and the record says how many were replaced
and in which fields. Every other character, NUL and control characters included, is kept as
it is; JSON escapes those losslessly.
"""

from __future__ import annotations

from typing import Any

# Field paths kept per record; the count covers them all.
MAX_PATHS = 50
# Deeper than this, a value cannot come from our own records; it is stored as its repr.
MAX_DEPTH = 64


def escape_unencodable(text: str) -> tuple[str, int]:
    """``text`` with every lone surrogate spelled ``\\uXXXX``, and how many there were."""
    if text.isascii():
        return text, 0
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # Only surrogates fail to encode; backslashreplace spells each as exactly \uXXXX
        # (6 characters for 1), at C speed even for megabytes of them.
        fixed = text.encode("utf-8", "backslashreplace").decode("utf-8")
        return fixed, (len(fixed) - len(text)) // 5
    return text, 0


def safe_text(text: str) -> str:
    """``text`` made encodable (for messages and logs, where no count is needed)."""
    return escape_unencodable(text)[0]


class Replacements:
    """What :func:`make_encodable` changed: a count and the first few JSON paths."""

    def __init__(self) -> None:
        self.count = 0
        self.paths: list[str] = []

    def note(self, path: str, count: int) -> None:
        self.count += count
        if len(self.paths) < MAX_PATHS:
            self.paths.append(path or "(root)")


def make_encodable(value: Any, replacements: Replacements, path: str = "", depth: int = 0) -> Any:
    """A JSON-ready copy of ``value`` whose every string encodes as UTF-8.

    Keys are escaped like values; anything that is not JSON data becomes its ``repr``.
    """
    if isinstance(value, str):
        fixed, count = escape_unencodable(value)
        if count:
            replacements.note(path, count)
        return fixed
    if value is None or isinstance(value, bool | int | float):
        return value
    if depth >= MAX_DEPTH:
        return make_encodable(repr(value)[:10_000], replacements, path, depth=0)
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            key_text = make_encodable(str(key), replacements, f"{path}.<key>" if path else "<key>")
            child = f"{path}.{key_text}" if path else key_text
            out[key_text] = make_encodable(item, replacements, child, depth + 1)
        return out
    if isinstance(value, list | tuple):
        return [
            make_encodable(item, replacements, f"{path}.{index}" if path else str(index), depth + 1)
            for index, item in enumerate(value)
        ]
    return make_encodable(repr(value), replacements, path, depth)
