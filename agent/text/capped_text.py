"""Text kept for audit (judge prompts and replies, references) with a bound on its size.

Up to ``CAPPED_TEXT_CHARS`` characters the text is stored exactly as it was. Longer text keeps
its first and last halves of that budget around one marker line that says how many characters
were left out and gives the SHA-256 of the whole text (UTF-8, ``surrogatepass`` so any str
hashes), so a reader can still prove which text was used by rebuilding it and comparing.
"""

from __future__ import annotations

import hashlib

CAPPED_TEXT_CHARS = 200_000
OMISSION_MARKER = (
    "\n[... proctor omitted {omitted:,} characters here; "
    "the whole text ({total:,} characters) has sha256 {digest} ...]\n"
)


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def capped(text: str, limit: int = CAPPED_TEXT_CHARS) -> str:
    """``text`` itself when it fits in ``limit`` characters, else head + marker + tail."""
    if len(text) <= limit:
        return text
    head = limit // 2
    tail = limit - head
    marker = OMISSION_MARKER.format(omitted=len(text) - limit, total=len(text), digest=text_sha256(text))
    return text[:head] + marker + text[len(text) - tail :]
