"""Program output made safe to show on a terminal: no byte of it can drive the terminal.

A sandboxed program may print escape sequences that move the cursor, rewrite earlier lines,
retitle the window or hide text, and bidi controls that reorder what is displayed. On a
terminal every such character is shown as a visible escape instead (``\\x1b``, ``\\u202e``);
newline and tab stay as they are. Pipes and ``--json`` are never escaped: they are exact.
"""

from __future__ import annotations

import re

# C0 controls except tab and newline (carriage return and backspace can overwrite what was
# shown), DEL, the C1 controls (U+009B alone is a CSI on many terminals), and the Unicode
# bidi embeddings, overrides, isolates and marks that reorder displayed text.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_for_terminal(text: str) -> str:
    return _UNSAFE.sub(_visible, text)
