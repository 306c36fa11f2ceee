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

That comparison is the one cost left that grows with the conversation, so a request pays it
once: :meth:`MessageHistory.view` checks the prefix and hands back what the request and its
reply's floor read (the messages as sent, their text length, their JSON), all as of that one
check. The reply's floor therefore covers the messages the request carried.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from proctor.agent.model import tokens
from proctor.agent.model.base import record_message


def dumps(value: Any) -> bytes:
    """JSON as the OpenAI SDK (and httpx) encode a request body: compact, UTF-8, no NaN."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


# Values a snapshot shares with the message instead of copying: immutable, and compared by value.
_ATOMS = (str, int, float, bool, type(None))


def _snapshot(value: Any) -> Any:
    """A deep copy of JSON-shaped data, for the prefix check; ``copy.deepcopy`` for the rest.

    ``copy.deepcopy`` keeps a memo and dispatches per type, several times slower on the
    small nested dicts a message is; for dicts, lists and atoms this builds the same copy.
    """
    kind = type(value)
    if kind in _ATOMS:
        return value
    if kind is dict:
        return {key: _snapshot(item) for key, item in value.items()}
    if kind is list:
        return [_snapshot(item) for item in value]
    return copy.deepcopy(value)


@dataclass(frozen=True)
class HistoryView:
    """What one request reads of a :class:`MessageHistory`, as of one check of its prefix."""

    # ``[record_message(m) for m in history]``, a list of its own.
    sent: list[dict[str, Any]]
    # ``sum(tokens.message_text_chars(m) for m in history)``.
    text_chars: int
    # The history's encodings of ``sent``, shared with it (both only ever append).
    _fragments: list[bytes]

    def encoded(self) -> bytes:
        """``dumps(self.sent)``, byte for byte, encoding only messages not encoded before.

        Raises as :func:`dumps` would; a message that fails is not cached.
        """
        fragments = self._fragments
        for message in self.sent[len(fragments) :]:
            fragments.append(dumps(message))
        return b"[" + b",".join(fragments[: len(self.sent)]) + b"]"


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
            snapshot = _snapshot(message)
            self._chars += chars
            self._snapshot.append(snapshot)
            self._sent.append(record_message(message))

    def view(self) -> HistoryView:
        """The history as one request reads it, from a single check of the cached prefix."""
        self._sync()
        return HistoryView(list(self._sent), self._chars, self._fragments)

    def text_chars(self) -> int:
        """``sum(tokens.message_text_chars(m) for m in self)``."""
        self._sync()
        return self._chars

    def sent_messages(self) -> list[dict[str, Any]]:
        """``[record_message(m) for m in self]``, as a new list."""
        return self.view().sent

    def encoded_sent_messages(self) -> bytes:
        """``dumps([record_message(m) for m in self])``, byte for byte, encoding only new messages.

        Raises as :func:`dumps` would (a lone surrogate: ``UnicodeEncodeError``; a value JSON
        cannot hold: ``TypeError`` / ``ValueError``); a message that fails is not cached.
        """
        return self.view().encoded()


def view_of(messages: list[dict[str, Any]]) -> HistoryView | None:
    """One request's :class:`HistoryView` of a :class:`MessageHistory`; None for a plain list,
    or for a history holding a message the cache cannot measure or copy (then the callers
    below walk it from scratch, as for a plain list)."""
    if isinstance(messages, MessageHistory):
        try:
            return messages.view()
        except Exception:  # what the cache cannot take, the from-scratch walks decide
            return None
    return None


def prompt_tokens_floor(messages: list[dict[str, Any]], view: HistoryView | None = None) -> int:
    """:func:`tokens.prompt_tokens_floor`, from ``view`` when given (the history as that request
    sent it), else incremental for a :class:`MessageHistory`."""
    if view is not None:
        return tokens.chars_floor(view.text_chars)
    if isinstance(messages, MessageHistory):
        try:
            return tokens.chars_floor(messages.text_chars())
        except Exception:  # what the cache cannot take, the walk below decides
            pass
    return tokens.prompt_tokens_floor(messages)


def sent_messages(messages: list[dict[str, Any]], view: HistoryView | None = None) -> list[dict[str, Any]]:
    """Each message as a request carries it (``record_message``), cached for a history."""
    if view is not None:
        return view.sent
    if isinstance(messages, MessageHistory):
        try:
            return messages.sent_messages()
        except Exception:  # a message the cache cannot measure or copy
            pass
    return [record_message(m) for m in messages]
