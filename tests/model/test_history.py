"""MessageHistory: incremental answers equal the from-scratch ones, for any conversation.

The cache makes the per-turn cost independent of the conversation's length (issue 27); these
tests pin that it changes nothing: the token floor, the messages as sent and their JSON bytes
are compared with the from-scratch computation after every append and after edits of every
kind, on random conversations with hostile text (lone surrogates, special-token strings,
huge strings, content of the wrong type, tool calls of the wrong shape).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proctor.agent.inputs.config import ModelConfig
from proctor.agent.model import history, tokens
from proctor.agent.model.base import REPLAY_KEY, record_message
from proctor.agent.model.history import MessageHistory
from proctor.agent.model.openai_client import OpenAIChatClient
from tests.support.scripted_server import Reply, ReportedUsage, ScriptedServer

HOSTILE_TEXT = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["<|endoftext|>", "<|im_start|>", "\ud800", "a\udfffb", "\x00", "é" * 300, "x" * 5000]),
)
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | HOSTILE_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
CONTENT = st.one_of(
    st.none(),
    HOSTILE_TEXT,
    st.lists(
        st.one_of(
            st.fixed_dictionaries({"type": st.just("text"), "text": HOSTILE_TEXT}),
            st.fixed_dictionaries({"output": HOSTILE_TEXT}),
            HOSTILE_TEXT,
            JSONISH,
        ),
        max_size=3,
    ),
    st.dictionaries(st.text(max_size=5), JSONISH, max_size=2),
    st.integers(),
)
CALL = st.one_of(
    st.fixed_dictionaries(
        {
            "id": HOSTILE_TEXT,
            "type": st.just("function"),
            "function": st.fixed_dictionaries({"name": HOSTILE_TEXT, "arguments": HOSTILE_TEXT}),
        }
    ),
    st.fixed_dictionaries({"function": st.dictionaries(st.sampled_from(["name", "arguments"]), JSONISH)}),
    JSONISH,
)
MESSAGE = st.one_of(
    st.fixed_dictionaries({"role": st.sampled_from(["user", "system"]), "content": CONTENT}),
    st.fixed_dictionaries(
        {"role": st.just("assistant"), "content": CONTENT},
        optional={"tool_calls": st.lists(CALL, max_size=3), REPLAY_KEY: st.lists(JSONISH, max_size=2)},
    ),
    st.fixed_dictionaries(
        {"role": st.just("tool"), "tool_call_id": HOSTILE_TEXT, "content": CONTENT},
        optional={"name": HOSTILE_TEXT},
    ),
)


def _outcome(compute: Any) -> tuple[str, Any]:
    """A value, or the type of the error computing it raised."""
    try:
        return "value", compute()
    except Exception as exc:
        return "error", type(exc).__name__


def _assert_matches_scratch(messages: MessageHistory, *, same_objects: bool = True) -> None:
    plain = list(messages)
    assert history.prompt_tokens_floor(messages) == tokens.prompt_tokens_floor(plain)
    sent = history.sent_messages(messages)
    assert sent == [record_message(m) for m in plain]
    # A message without reasoning items goes out as the very object the history holds (after
    # an edit that put an equal message in an old one's place, the equal old one may go out).
    assert not same_objects or all(a is m for a, m in zip(sent, plain, strict=True) if REPLAY_KEY not in m)
    assert _outcome(messages.encoded_sent_messages) == _outcome(lambda: history.dumps(sent))


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(MESSAGE, min_size=1, max_size=12))
def test_after_every_append_the_incremental_answers_equal_the_from_scratch_ones(
    messages: list[dict[str, Any]],
) -> None:
    conversation = MessageHistory()
    for message in messages:
        conversation.append(message)
        _assert_matches_scratch(conversation)


EDITS = st.sampled_from(["pop", "replace", "insert", "content", "nested", "clear", "extend", "sort"])


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(MESSAGE, min_size=2, max_size=8), EDITS, MESSAGE, st.data())
def test_any_edit_of_the_history_or_of_a_message_in_place_is_seen(
    messages: list[dict[str, Any]], edit: str, other: dict[str, Any], data: st.DataObject
) -> None:
    conversation = MessageHistory(messages)
    _assert_matches_scratch(conversation)
    index = data.draw(st.integers(0, len(conversation) - 1))
    target = conversation[index]
    if edit == "pop":
        conversation.pop(index)
    elif edit == "replace":
        conversation[index] = other
    elif edit == "insert":
        conversation.insert(index, other)
    elif edit == "content":
        target["content"] = data.draw(CONTENT)
    elif edit == "nested":
        target["tool_calls"] = [{"function": {"name": "python", "arguments": "{}"}}]
        _assert_matches_scratch(conversation)
        target["tool_calls"][0]["function"]["arguments"] = data.draw(HOSTILE_TEXT)
    elif edit == "clear":
        conversation.clear()
    elif edit == "extend":
        conversation.extend([other, copy.deepcopy(other)])
    else:
        conversation.sort(key=lambda m: str(m.get("role")))
    _assert_matches_scratch(conversation, same_objects=False)


def test_a_surrogate_fails_encoding_as_json_dumps_does_and_nothing_is_cached() -> None:
    conversation = MessageHistory([{"role": "user", "content": "fine"}])
    assert conversation.encoded_sent_messages() == b'[{"role":"user","content":"fine"}]'
    conversation.append({"role": "user", "content": "lone \ud800"})
    with pytest.raises(UnicodeEncodeError):
        conversation.encoded_sent_messages()
    # Replaced (as the client's fallback does for the whole request): encodes from there.
    conversation[-1] = {"role": "user", "content": "fixed"}
    assert json.loads(conversation.encoded_sent_messages())[-1]["content"] == "fixed"


def test_the_floor_is_not_walked_again_for_old_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    """The point of the cache: a turn measures only the messages appended since the last one."""
    conversation = MessageHistory([{"role": "user", "content": f"m{i}"} for i in range(50)])
    history.prompt_tokens_floor(conversation)
    measured: list[dict[str, Any]] = []
    original = tokens.message_text_chars
    monkeypatch.setattr(tokens, "message_text_chars", lambda m: measured.append(m) or original(m))
    conversation.append({"role": "user", "content": "new"})
    history.prompt_tokens_floor(conversation)
    history.sent_messages(conversation)
    conversation.encoded_sent_messages()
    assert measured == [{"role": "user", "content": "new"}]


@pytest.mark.slow
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(MESSAGE, min_size=1, max_size=8),
    st.dictionaries(st.text(max_size=8), JSONISH, max_size=3),
    st.one_of(st.none(), st.integers(1, 10**6)),
)
def test_the_chat_request_bytes_equal_the_sdk_encoding_of_the_request(
    messages: list[dict[str, Any]], extra_body: dict[str, Any], max_tokens: int | None
) -> None:
    """What goes on the wire is what the SDK would have encoded from the request dict."""
    client = OpenAIChatClient(
        ModelConfig(name="openai/m", base_url="http://127.0.0.1:9/v1", extra_body=extra_body)
    )
    conversation = MessageHistory()
    tools = [{"type": "function", "function": {"name": "python", "parameters": {"type": "object"}}}]
    for message in messages:
        conversation.append(message)
        view = history.view_of(conversation)
        request = client._request(conversation, tools, "auto", max_tokens, view)
        expected = _outcome(lambda request=request: history.dumps(request))
        got = _outcome(lambda request=request, view=view: client._encoded(request, view))
        if got == ("value", None):
            # Left to the SDK: only where the fast path does not apply.
            assert "messages" in extra_body
            continue
        assert got == expected


def test_a_plain_list_is_left_to_the_sdk_and_walked_from_scratch() -> None:
    client = OpenAIChatClient(ModelConfig(name="openai/m", base_url="http://127.0.0.1:9/v1"))
    plain = [{"role": "user", "content": "x" * 600}]
    assert history.view_of(plain) is None
    assert client._encoded(client._request(plain, None, None, None), None) is None
    assert history.prompt_tokens_floor(plain) == tokens.prompt_tokens_floor(plain) == 3


async def test_a_request_checks_the_history_once_and_sees_edits_made_before_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The prefix check, the one per-turn cost that grows with the conversation, runs once per
    request: the request's messages, their bytes and the reply's token floor share it."""
    checks: list[int] = []
    original = MessageHistory._sync

    def counted(self: MessageHistory) -> None:
        checks.append(len(self))
        original(self)

    monkeypatch.setattr(MessageHistory, "_sync", counted)
    conversation = MessageHistory([{"role": "user", "content": "x" * 2560}])
    script = [Reply(content="a", usage=ReportedUsage(5, 1)), Reply(content="b", usage=ReportedUsage(5, 1))]
    with ScriptedServer(script) as server:
        client = OpenAIChatClient(ModelConfig(name="openai/m", base_url=server.base_url, max_retries=0))
        first = await client.complete(conversation)
        conversation.append(first.as_message())
        conversation[0]["content"] = "edited in place"
        second = await client.complete(conversation)
        await client.aclose()
    assert checks == [1, 2]
    assert server.requests[1].json["messages"] == [
        {"role": "user", "content": "edited in place"},
        {"role": "assistant", "content": "a"},
    ]
    # 2,560 characters cannot be 5 tokens (floor 10): estimated; after the edit the floor is 1.
    assert first.usage.estimated and not second.usage.estimated
