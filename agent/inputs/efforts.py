"""The reasoning efforts an OpenAI-compatible API accepts, taken from the `openai` SDK's own type.

The SDK is generated from OpenAI's API specification, so its ``ReasoningEffort`` literal is the
API's list (``none``, ``minimal``, ``low``, ``medium``, ``high``, ``xhigh``, ``max`` in
openai 3.57); a newer SDK that adds a value makes it valid here without a code change. Not
every model takes every value (gpt-5.1 has no ``minimal``, older models no ``none``): that the
provider says with a 400 naming the value, before any sample is spent if preflight runs.
"""

from __future__ import annotations

import typing

# Used only when the SDK's type cannot be read (an SDK that moved it).
_FALLBACK = ("none", "minimal", "low", "medium", "high", "xhigh")


def _from_sdk() -> tuple[str, ...]:
    try:
        from openai.types.shared.reasoning_effort import ReasoningEffort
    except ImportError:
        return _FALLBACK
    values: list[str] = []
    pending: list[typing.Any] = [ReasoningEffort]
    while pending:
        item = pending.pop(0)
        for arg in typing.get_args(item):
            if isinstance(arg, str):
                values.append(arg)
            elif arg is not type(None):
                pending.append(arg)
    return tuple(dict.fromkeys(values)) or _FALLBACK


REASONING_EFFORTS: tuple[str, ...] = _from_sdk()


def check_reasoning_effort(value: str) -> str:
    """``value`` when the API accepts it; ValueError naming the accepted ones otherwise."""
    if value not in REASONING_EFFORTS:
        raise ValueError(
            f"{value!r} is not a reasoning effort the API accepts ({', '.join(REASONING_EFFORTS)})"
        )
    return value
