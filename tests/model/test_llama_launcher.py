"""The bounded tool-calling format never lets one generation run until the context is full."""

from __future__ import annotations

from typing import Any

import pytest

from proctor.agent.model.llama_launcher import FALLBACK_MAX_TOKENS, _BoundedLlama


class RecordingModel:
    verbose = False

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def create_completion(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        return {"choices": [{"text": ""}]}


@pytest.mark.parametrize(("asked", "sent"), [(None, 64), (0, 64), (-1, 64), (10, 10), (64, 64), (5000, 64)])
def test_every_completion_is_capped_at_the_request_limit(asked: int | None, sent: int) -> None:
    model = RecordingModel()
    _BoundedLlama(model, 64).create_completion(prompt="p", max_tokens=asked)
    assert model.calls[0]["max_tokens"] == sent


def test_other_attributes_reach_the_real_model() -> None:
    model = RecordingModel()
    assert _BoundedLlama(model, FALLBACK_MAX_TOKENS).verbose is False


@pytest.mark.local_model
def test_the_bounded_format_is_registered_with_llama_cpp() -> None:
    from llama_cpp.llama_chat_format import get_chat_completion_handler

    from proctor.agent.model.llama_launcher import BOUNDED_FORMAT, bounded_function_calling, register

    register()
    assert get_chat_completion_handler(BOUNDED_FORMAT) is bounded_function_calling
