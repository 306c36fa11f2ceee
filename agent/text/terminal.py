"""The one way text from outside Proctor is shown on a terminal: no character of it can drive it.

A sandboxed program, a model's reply, a task file or an endpoint's error may hold escape
sequences that move the cursor, rewrite earlier lines, retitle the window or hide text, and
bidi controls that reorder what is displayed (U+202E makes ``txt.exe`` read ``exe.txt``). On a
terminal every such character is shown as a visible escape instead (``\\x1b``, ``\\u202e``);
newline and tab stay as they are. Pipes, files and ``--json`` are never escaped: they are exact.
Every terminal surface (progress lines, the live display, summary tables, the dry run, `list`,
`validate`, `view --compare`, sandbox output) goes through this module
(tests/test_terminal_text.py).
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
    """``text`` with every control and bidi character shown as its escape; all else unchanged."""
    return _UNSAFE.sub(_visible, text)


def one_line(text: str) -> str:
    """``text`` as one line safe to print: :func:`escape_for_terminal`, newlines shown as ``\\n``.

    For Proctor's own lines that quote what an endpoint or a file said (``proctor: error: ...``,
    ``proctor: stopped: ...``): a message holding a newline and an escape could otherwise forge a
    line of ours ("finished, all correct") or clear the screen. Files keep the text exactly.
    """
    return escape_for_terminal(text).replace("\n", "\\n")
