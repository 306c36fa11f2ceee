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
    return int(match.group(1)) if match else None
