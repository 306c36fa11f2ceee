"""Learn a model's own output-token maximum from the provider's refusal.

The budget sets ``max_output_tokens`` to the room left under the cap, which early in a
conversation can be far above what a model may produce; OpenAI-style endpoints then refuse
the request ("... This model supports at most 16384 completion tokens, whereas you provided
999000."). The loop lowers its ceiling to the stated maximum and asks again, once.
"""

from __future__ import annotations

import re

_AT_MOST = re.compile(r"supports at most (\d+) (?:completion|output) tokens", re.IGNORECASE)


def output_ceiling_from_error(message: str) -> int | None:
    """The model's stated output maximum, when ``message`` is such a refusal; else None."""
    match = _AT_MOST.search(message)
    if match:
        return int(match.group(1))
    return output_room_from_error(message)


# vLLM and OpenAI, when the prompt fits but prompt + requested output does not: "... maximum
# context length is N tokens. However, you requested T tokens (P in the messages, C in the
# completion)". The output allowance is then the harness's choice, not the model's overflow.
_CONTEXT_SPLIT = re.compile(
    r"maximum context length is (\d{1,12}) tokens.{0,200}?"
    r"\((\d{1,12}) in the messages, (\d{1,12}) in the completion",
    re.IGNORECASE | re.DOTALL,
)


def output_room_from_error(message: str) -> int | None:
    """The output the context still holds after the prompt, when ``message`` says the prompt
    fits and only the requested output overflowed; else None (the conversation itself overflowed)."""
    match = _CONTEXT_SPLIT.search(message[:4_000])
    if match is None:
        return None
    context, prompt = int(match.group(1)), int(match.group(2))
    room = context - prompt
    return room if room > 0 else None
