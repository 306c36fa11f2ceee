"""Learn a model's own output-token maximum, or the output its context still holds, from the
provider's refusal of a request.

The budget sets ``max_output_tokens`` to the room left under the cap, which early in a
conversation can be far above what a model may produce; endpoints then refuse the request,
each in its own words. The loop lowers its ceiling to the stated maximum and asks again, once.
The texts recognised, as the providers word them:

- OpenAI (Chat Completions): "max_tokens is too large: 999000. This model supports at most
  16384 completion tokens, whereas you provided 999000."; OpenAI's parameter validation, the
  Responses API's ``max_output_tokens`` included: "Invalid 'max_output_tokens': integer above
  maximum value. Expected a value <= 128000, but got 999000 instead.";
- Anthropic (and its OpenAI SDK compatibility): "max_tokens: 999000 > 64000, which is the
  maximum allowed number of output tokens for claude-...";
- Gemini (Vertex AI; its OpenAI-compatible endpoints relay it): "Unable to submit request
  because it has a maxOutputTokens value of 999000 but the supported range is from 1
  (inclusive) to 65537 (exclusive). Update the value and try again.";
- DeepSeek: "Invalid max_tokens value, the valid range of max_tokens is [1, 8192]".

A refusal naming the context instead ("... (P in the messages, C in the completion)", Anthropic's
"input length and `max_tokens` exceed context limit: P + C > L", TGI's "`inputs` tokens +
`max_new_tokens` must be <= L. Given: P `inputs` tokens") gives the room the context leaves
after the prompt, when the prompt itself fits.
"""

from __future__ import annotations

import re

# Each pattern's group 1 is the largest output the request may ask for, after ``_ADJUST``.
_OUTPUT_MAXIMUM = (
    re.compile(r"supports at most (\d{1,12}) (?:completion|output) tokens", re.IGNORECASE),
    re.compile(
        r"max_(?:output_|completion_)?tokens\W{0,4}:?\s*integer above maximum value\.?\s*"
        r"expected a value <= (\d{1,12})",
        re.IGNORECASE,
    ),
    re.compile(
        r"max_tokens:\s*\d{1,12}\s*>\s*(\d{1,12}), which is the maximum allowed number of output tokens",
        re.IGNORECASE,
    ),
    re.compile(r"valid range of max_(?:completion_)?tokens is \[1, (\d{1,12})\]", re.IGNORECASE),
)
# Gemini states an exclusive upper bound: the largest allowed value is one below it.
_EXCLUSIVE_MAXIMUM = re.compile(
    r"maxOutputTokens value of \d{1,12} but the supported range is from 1 \(inclusive\) to (\d{1,12}) "
    r"\(exclusive\)",
    re.IGNORECASE,
)


def output_ceiling_from_error(message: str) -> int | None:
    """The model's stated output maximum, or the room its context holds after the prompt, when
    ``message`` is such a refusal; else None."""
    text = message[:4_000]
    for pattern in _OUTPUT_MAXIMUM:
        match = pattern.search(text)
        if match:
            return int(match.group(1)) or None
    match = _EXCLUSIVE_MAXIMUM.search(text)
    if match:
        return int(match.group(1)) - 1 or None
    return output_room_from_error(message)


# (context, prompt) from a refusal that says the prompt plus the requested output exceed the
# context: vLLM and OpenAI "... maximum context length is N tokens. However, you requested T
# tokens (P in the messages, C in the completion)"; Anthropic "input length and `max_tokens`
# exceed context limit: P + C > N"; TGI "`inputs` tokens + `max_new_tokens` must be <= N.
# Given: P `inputs` tokens".
_CONTEXT_SPLITS = (
    (
        re.compile(
            r"maximum context length is (\d{1,12}) tokens.{0,200}?"
            r"\((\d{1,12}) in the messages, (\d{1,12}) in the completion",
            re.IGNORECASE | re.DOTALL,
        ),
        1,
        2,
    ),
    (
        re.compile(
            r"exceed context limit: (\d{1,12}) \+ (\d{1,12}) > (\d{1,12})",
            re.IGNORECASE,
        ),
        3,
        1,
    ),
    (
        re.compile(
            r"max_new_tokens.{0,3} must be <= (\d{1,12})\. Given: (\d{1,12}) .{0,3}inputs",
            re.IGNORECASE,
        ),
        1,
        2,
    ),
)


def output_room_from_error(message: str) -> int | None:
    """The output the context still holds after the prompt, when ``message`` says the prompt
    fits and only the requested output overflowed; else None (the conversation itself overflowed)."""
    text = message[:4_000]
    for pattern, context_group, prompt_group in _CONTEXT_SPLITS:
        match = pattern.search(text)
        if match is None:
            continue
        context, prompt = int(match.group(context_group)), int(match.group(prompt_group))
        room = context - prompt
        return room if room > 0 else None
    return None
