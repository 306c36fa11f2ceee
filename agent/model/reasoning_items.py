"""Responses API reasoning items: carried to the next request as returned, kept for audit.

A reasoning model that calls tools expects the reasoning items of its previous reply back in
the next request, each just before the item it preceded (its message or function call);
without them it re-reasons from the visible transcript and multi-turn tool use degrades.
Requests are stateless (``store: false``), so the items travel encrypted: the request asks for
``include: ["reasoning.encrypted_content"]`` and the items are sent back with that content,
their ids and summaries exactly as returned.

The items are provider data that crossed a trust boundary. Proctor never interprets or
executes them: it checks only the shape the API needs to accept them back (an id, a list of
summary parts, strings where strings belong) and a size bound, then hands them to the same
provider. An item that fails is recorded with a deviation and not sent back; the reply is
used as usual. Every item, accepted or not, is kept in the sample's record in a size-capped
copy for audit.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from proctor.agent.model.reply_shapes import MAX_ID_CHARS, as_list, field_of, json_type

ENCRYPTED_REASONING = "reasoning.encrypted_content"
# The reasoning item's fields the Responses API accepts back as input; others are dropped.
REPLAY_FIELDS = ("type", "id", "summary", "content", "encrypted_content", "status")
# One item's JSON may be this long to be sent back. Encrypted reasoning of a very long
# high-effort reply is a few hundred kilobytes; anything near this bound is not reasoning.
MAX_REPLAY_ITEM_CHARS = 4_000_000
# Reasoning items per reply sent back; OpenAI's replies carry one or a few.
MAX_REPLAY_ITEMS = 64
# The record's copy: strings longer than this keep a head, their length and sha256 ...
MAX_RECORD_STRING_CHARS = 2_000
RECORD_HEAD_CHARS = 200
# ... and an item whose capped copy is still larger keeps only its size and digest.
MAX_RECORD_ITEM_CHARS = 16_000
MAX_RECORD_DEPTH = 6
MAX_RECORD_LIST = 32


@dataclass
class ReplyLayout:
    """What one reply contributes to the next request and to the record."""

    # The output in order: reasoning items to send back as they are, and the markers
    # {"type": "message"} and {"type": "function_call", "index": i} for the reply's text and
    # its i-th tool call. Empty when no reasoning item is to be sent back.
    replay: list[dict[str, Any]] = field(default_factory=list)
    # Every reasoning item of the reply, size-capped, for the record.
    record: list[dict[str, Any]] = field(default_factory=list)
    deviations: list[str] = field(default_factory=list)


def _plain(value: Any) -> Any:
    """An SDK object (built without validation) as plain JSON data; raises if it is not."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        value = dump(mode="json", exclude_none=True, warnings=False)
    # Round-trip through JSON: whatever is left must be JSON data, and is copied.
    return json.loads(json.dumps(value, allow_nan=False))


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _capped(value: Any, depth: int = 0) -> Any:
    if isinstance(value, str):
        if len(value) <= MAX_RECORD_STRING_CHARS:
            return value
        return {"head": value[:RECORD_HEAD_CHARS], "chars": len(value), "sha256": _digest(value)}
    if depth >= MAX_RECORD_DEPTH and isinstance(value, dict | list):
        return {"omitted": f"{json_type(value)} nested deeper than {MAX_RECORD_DEPTH}"}
    if isinstance(value, dict):
        pairs = list(value.items())[:MAX_RECORD_LIST]
        return {str(k)[:MAX_ID_CHARS]: _capped(v, depth + 1) for k, v in pairs}
    if isinstance(value, list):
        kept = [_capped(v, depth + 1) for v in value[:MAX_RECORD_LIST]]
        if len(value) > MAX_RECORD_LIST:
            kept.append({"omitted": f"{len(value) - MAX_RECORD_LIST} more"})
        return kept
    return value


def record_copy(item: Any) -> dict[str, Any]:
    """A size-capped copy of one output item for the record; never raises."""
    try:
        plain = _plain(item)
    except (TypeError, ValueError, RecursionError) as exc:
        return {"unreadable": f"{type(item).__name__}: {str(exc)[:200]}"}
    capped = _capped(plain)
    text = json.dumps(capped, ensure_ascii=False)
    if len(text) > MAX_RECORD_ITEM_CHARS:
        full = json.dumps(plain, ensure_ascii=False)
        return {"omitted": f"item of {len(full):,} JSON characters", "sha256": _digest(full)}
    return capped if isinstance(capped, dict) else {"value": capped}


def _is_text_part(part: Any) -> bool:
    return (
        isinstance(part, dict) and isinstance(part.get("text"), str) and isinstance(part.get("type", ""), str)
    )


def _text_parts(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Summary or content parts with only the fields the API takes back (type, text)."""
    return [{key: part[key] for key in ("type", "text") if key in part} for part in parts]


def _replay_problem(item: dict[str, Any], stored: bool) -> str | None:
    """Why ``item`` cannot go back to the API as it is, or None."""
    item_id = item.get("id")
    if not isinstance(item_id, str) or not item_id.strip():
        return f"its id is {json_type(item_id)}"
    if len(item_id) > MAX_ID_CHARS:
        return f"its id is {len(item_id):,} characters long"
    summary = item.get("summary", [])
    if not isinstance(summary, list):
        return f"its summary is {json_type(summary)}, not a list"
    for part in summary:
        if not _is_text_part(part):
            return "a summary part is not an object with a text string"
    content = item.get("content")
    if content is not None and not (isinstance(content, list) and all(_is_text_part(p) for p in content)):
        return "its content is not a list of objects with a text string"
    encrypted = item.get("encrypted_content")
    if encrypted is not None and not isinstance(encrypted, str):
        return f"its encrypted_content is {json_type(encrypted)}, not a string"
    status = item.get("status")
    if status is not None and not isinstance(status, str):
        return f"its status is {json_type(status)}"
    if encrypted is None and not stored:
        # With store: false the server keeps nothing; an id alone would be refused.
        return "it has no encrypted_content, and the request was not stored"
    return None


def reasoning_for_replay(item: Any, *, stored: bool) -> tuple[dict[str, Any] | None, str | None]:
    """The item as the API takes it back (its accepted fields, values as returned), or why not."""
    try:
        plain = _plain(item)
    except (TypeError, ValueError, RecursionError):
        return None, "cannot be read as JSON"
    if not isinstance(plain, dict):
        return None, f"it is {json_type(plain)}"
    kept = {name: plain[name] for name in REPLAY_FIELDS if plain.get(name) is not None}
    kept.setdefault("summary", [])  # required by the API; an absent one is an empty one
    problem = _replay_problem(kept, stored)
    if problem is not None:
        return None, problem
    # Extra fields in a part would make the API refuse the whole request: only these go.
    kept["summary"] = _text_parts(kept["summary"])
    if "content" in kept:
        kept["content"] = _text_parts(kept["content"])
    size = len(json.dumps(kept))
    if size > MAX_REPLAY_ITEM_CHARS:
        return None, f"it is {size:,} JSON characters (more than {MAX_REPLAY_ITEM_CHARS:,})"
    return kept, None


def layout_of(output: list[Any], *, stored: bool) -> ReplyLayout:
    """The order of a reply's output items, with its reasoning items checked for replay."""
    layout = ReplyLayout()
    sequence: list[dict[str, Any]] = []
    calls = 0
    replayable = 0
    for position, item in enumerate(output):
        kind = field_of(item, "type")
        if kind == "message":
            sequence.append({"type": "message"})
        elif kind == "function_call":
            sequence.append({"type": "function_call", "index": calls})
            calls += 1
        elif kind == "reasoning":
            layout.record.append(record_copy(item))
            kept, problem = reasoning_for_replay(item, stored=stored)
            if kept is not None and replayable >= MAX_REPLAY_ITEMS:
                problem = f"the reply has more than {MAX_REPLAY_ITEMS} reasoning items"
            if problem is not None or kept is None:
                label = field_of(item, "id")
                name = repr(label[:60]) if isinstance(label, str) else f"at output[{position}]"
                layout.deviations.append(f"reasoning item {name} not sent back: {problem}")
                continue
            sequence.append(kept)
            replayable += 1
    if replayable:
        layout.replay = sequence
    return layout


def replay_input(
    layout: Any, text: str, calls: list[dict[str, Any]], *, with_reasoning: bool = True
) -> list[dict[str, Any]]:
    """One assistant turn's input items in the reply's original order.

    ``text`` is the turn's text and ``calls`` its function_call items in call order; the
    reasoning items go back between them exactly where the reply had them (none when
    ``with_reasoning`` is off).
    """
    items: list[dict[str, Any]] = []
    text_sent = not text
    used: set[int] = set()
    for entry in as_list(layout):
        if not isinstance(entry, dict):
            continue
        kind = entry.get("type")
        if kind == "reasoning":
            if with_reasoning:
                items.append(entry)
        elif kind == "message" and not text_sent:
            items.append({"role": "assistant", "content": text})
            text_sent = True
        elif kind == "function_call":
            index = entry.get("index")
            if isinstance(index, int) and 0 <= index < len(calls) and index not in used:
                items.append(calls[index])
                used.add(index)
    # Anything the layout did not place (it always places all) still goes, in order.
    if not text_sent:
        items.append({"role": "assistant", "content": text})
    items.extend(call for index, call in enumerate(calls) if index not in used)
    return items
