"""A conversation's history that remembers what it has already measured and encoded.

Chat Completions is stateless: every request re-sends the whole history, and every reply's
reported input count is checked against the floor of the history's text
(``tokens.prompt_tokens_floor``). Done from scratch, both walk every message every turn, so a
conversation's cost per turn grows with its length (at the 1M-token cap, ~1,500 messages:
the floor walk alone was ~40 % of the harness's time). A :class:`MessageHistory` keeps, for
the messages it has seen, their text length and their JSON encoding, so a turn measures and
encodes only the messages appended since the last one.

The invariant: every answer equals the from-scratch one (``tests/model/test_history.py``
checks it on random and hostile conversations). Before each use the cached prefix is compared
with a deep copy taken when it was measured (C-speed ``==``, identity short-circuits), so any
change to the list or to a message in place (removed, replaced, content edited) drops the
cache and everything is measured again. The one change equality cannot see is a value
replaced in place by an equal value of another type (``1`` by ``1.0`` or ``True``); message
values are strings, as the clients build them.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from typing import Any

from proctor.agent.model import tokens
from proctor.agent.model.base import record_message


def dumps(value: Any) -> bytes:
    """JSON as the OpenAI SDK (and httpx) encode a request body: compact, UTF-8, no NaN."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


class MessageHistory(list[dict[str, Any]]):
    """A list of Chat Completions messages with per-message measurements cached (see module)."""

    def __init__(self, messages: Iterable[dict[str, Any]] = ()) -> None:
        super().__init__(messages)
        self._reset()

    def _reset(self) -> None:
        # Deep copies of the messages measured so far, in order: the cache's validity check.
        self._snapshot: list[dict[str, Any]] = []
        # Their text length (``tokens.message_text_chars``), summed.
        self._chars = 0
        # Each message as a request carries it (``record_message``).
        self._sent: list[dict[str, Any]] = []
        # The JSON of the first len(_fragments) of those, encoded on first need.
        self._fragments: list[bytes] = []

    def _sync(self) -> None:
        known = len(self._snapshot)
        if len(self) < known or list.__getitem__(self, slice(0, known)) != self._snapshot:
            self._reset()
            known = 0
        for message in list.__getitem__(self, slice(known, None)):
            # Measured before anything is cached: a message that cannot be measured (or
            # copied) raises here exactly as the from-scratch walk would, and caches nothing.
            chars = tokens.message_text_chars(message)
            snapshot = copy.deepcopy(message)
            self._chars += chars
            self._snapshot.append(snapshot)
            self._sent.append(record_message(message))

    def text_chars(self) -> int:
        """``sum(tokens.message_text_chars(m) for m in self)``."""
        self._sync()
        return self._chars

    def sent_messages(self) -> list[dict[str, Any]]:
        """``[record_message(m) for m in self]``, as a new list."""
        self._sync()
        return list(self._sent)

    def encoded_sent_messages(self) -> bytes:
        """``dumps([record_message(m) for m in self])``, byte for byte, encoding only new messages.

        Raises as :func:`dumps` would (a lone surrogate: ``UnicodeEncodeError``; a value JSON
        cannot hold: ``TypeError`` / ``ValueError``); a message that fails is not cached.
        """
        self._sync()
        fragments = self._fragments
        for message in self._sent[len(fragments) :]:
            fragments.append(dumps(message))
        return b"[" + b",".join(fragments) + b"]"


def prompt_tokens_floor(messages: list[dict[str, Any]]) -> int:
    """:func:`tokens.prompt_tokens_floor`, incremental for a :class:`MessageHistory`."""
    if isinstance(messages, MessageHistory):
        try:
            return tokens.chars_floor(messages.text_chars())
        except Exception:  # what the cache cannot take, the walk below decides
            pass
    return tokens.prompt_tokens_floor(messages)


def sent_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each message as a request carries it (``record_message``), cached for a history."""
    if isinstance(messages, MessageHistory):
        try:
            return messages.sent_messages()
        except Exception:  # a message the cache cannot measure or copy
            pass
    return [record_message(m) for m in messages]
