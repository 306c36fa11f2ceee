"""What the loop learns from a provider's refusal of the requested output (not of the conversation)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from proctor.agent.tracks.frontiermath.provider_limits import (
    output_ceiling_from_error,
    output_room_from_error,
)


def _split(context: int, prompt: int, completion: int) -> str:
    return (
        f"This model's maximum context length is {context} tokens. However, you requested "
        f"{prompt + completion} tokens ({prompt} in the messages, {completion} in the completion). "
        "Please reduce the length of the messages or completion."
    )


def test_output_room_when_only_the_completion_overflowed() -> None:
    assert output_room_from_error(_split(32_768, 3_000, 990_000)) == 29_768
    assert output_ceiling_from_error("HTTP 400: " + _split(8_192, 8_000, 500)) == 192


def test_no_room_when_the_conversation_itself_overflowed() -> None:
    # The prompt alone fills the context: nothing to lower, the refusal is the model's outcome.
    assert output_room_from_error(_split(8_192, 8_192, 100)) is None
    assert output_room_from_error(_split(8_192, 9_000, 100)) is None
    assert output_room_from_error("This model's maximum context length is 8192 tokens.") is None
    assert output_ceiling_from_error("the request exceeds the available context size") is None


@given(context=st.integers(1, 10**7), prompt=st.integers(0, 10**7), completion=st.integers(0, 10**7))
def test_the_room_is_never_more_than_the_context_leaves(context: int, prompt: int, completion: int) -> None:
    room = output_room_from_error(_split(context, prompt, completion))
    if prompt >= context:
        assert room is None
    else:
        assert room == context - prompt and 0 < room <= context
