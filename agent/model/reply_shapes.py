"""Whatever an OpenAI-compatible server replies, turned into well-formed ToolCalls and text.

The SDK builds its reply objects without validating them, so a broken or hostile server's
fields arrive as any JSON value: ``arguments`` as an object, ``name`` as null, no ``id``,
the same ``id`` twice, ``function`` missing, ``type`` not "function", ``content`` as a list.
Nothing here raises on such a reply. Each call comes out with string ``id``, ``name`` and
``arguments`` (so the next request is well-formed for the real API: every tool result
answers a unique id the assistant message holds) and the list of its ``deviations`` from the
OpenAI shape; a deviation that makes the call unrunnable also sets ``problem``, which the
tracks send back to the model as the tool's error.
"""

from __future__ import annotations

import itertools
import json
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from proctor.agent.model.base import ToolCall

# The name a call without a usable name carries in the conversation and its record.
MISSING_NAME = "missing_name"
# Longest id kept as sent; longer ones are replaced (OpenAI's own ids are ~30 characters).
MAX_ID_CHARS = 256
# Longest tool name taken as a name; no tool of ours comes close.
MAX_NAME_CHARS = 256
# Largest token count taken as reported: 2**53, the last integer a float (and JavaScript, which
# reads the report) holds exactly, and millions of times any context window. JSON carries
# integers of any size; one past float's range overflowed the budget's arithmetic and every
# mean over the records, so a larger count is estimated instead, like any other insane count.
MAX_TOKEN_COUNT = 2**53
_ids = itertools.count(1)


def field_of(obj: Any, name: str) -> Any:
    """``obj.name`` or ``obj[name]``: unvalidated SDK objects hold either, or neither."""
    if isinstance(obj, dict):
        return obj.get(name)
    try:
        return getattr(obj, name, None)
    except Exception:  # a property of a half-built object may raise
        return None


def as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else []


def count_or_none(value: Any) -> int | None:
    """A token count as reported, or None (then estimated) when it is not a sane integer."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TOKEN_COUNT:
        return None
    return value


def text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def content_text(value: Any) -> tuple[str | None, str | None]:
    """Message content as text, and a deviation when it was not a string or null.

    A list of parts (the multimodal shape) keeps the text of its text parts.
    """
    if value is None or isinstance(value, str):
        return value, None
    if isinstance(value, list):
        texts = [t for t in (text_or_none(field_of(part, "text")) for part in value) if t is not None]
        return "".join(texts), f"content was a list of {len(value)} part(s); kept their text"
    return dump_json(value), f"content was {json_type(value)}, not a string"


def json_type(value: Any) -> str:
    if isinstance(value, dict):
        return "a JSON object"
    if isinstance(value, list):
        return "a JSON array"
    if isinstance(value, bool):
        return "a JSON boolean"
    if isinstance(value, int | float):
        return "a JSON number"
    if value is None:
        return "null"
    if isinstance(value, str):
        return "a string"
    return type(value).__name__


def dump_json(value: Any) -> str:
    """JSON text for a value that arrived decoded; its repr if even that fails (too deep)."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (ValueError, TypeError, RecursionError):
        return repr(value)[:100_000]


@dataclass
class RawCall:
    """One tool call's fields as the server sent them (any JSON value, or absent)."""

    id: Any
    name: Any
    arguments: Any
    type: Any = "function"
    # Chat Completions nests name and arguments in "function"; False when that was missing.
    has_function: bool = True


def _fresh_id() -> str:
    return f"call_proctor_{next(_ids)}_{secrets.token_hex(4)}"


def normalize_calls(raw_calls: Iterable[RawCall]) -> list[ToolCall]:
    """Well-formed ToolCalls, one per raw call, with unique ids and their deviations."""
    calls: list[ToolCall] = []
    used: set[str] = set()
    for raw in raw_calls:
        deviations: list[str] = []
        problems: list[str] = []
        call_id = raw.id if isinstance(raw.id, str) and raw.id.strip() else None
        if call_id is None:
            call_id = _fresh_id()
            deviations.append(f"no id ({json_type(raw.id)}); Proctor called it {call_id}")
        elif len(call_id) > MAX_ID_CHARS:
            replaced, call_id = call_id, _fresh_id()
            deviations.append(f"id of {len(replaced):,} characters; Proctor called it {call_id}")
        if call_id in used:
            duplicate, call_id = call_id, _fresh_id()
            deviations.append(f"duplicate id {duplicate!r}; Proctor called this one {call_id}")
        used.add(call_id)
        if raw.type != "function":
            problem = f"its type is {raw.type!r}, not 'function'"
            deviations.append(problem)
            problems.append(problem)
        if not raw.has_function:
            problem = "it has no 'function' field (the tool's name and arguments)"
            deviations.append(problem)
            problems.append(problem)
        if isinstance(raw.name, str) and len(raw.name) > MAX_NAME_CHARS:
            name = MISSING_NAME
            problem = f"the tool name is {len(raw.name):,} characters long"
            deviations.append(f"{problem}; Proctor called it {MISSING_NAME!r}")
            problems.append(problem)
        elif isinstance(raw.name, str) and raw.name:
            name = raw.name
        else:
            name = MISSING_NAME
            if raw.has_function:
                problem = f"the tool name is {json_type(raw.name) if raw.name != '' else 'empty'}"
                deviations.append(f"{problem}; Proctor called it {MISSING_NAME!r}")
                problems.append(problem)
        if isinstance(raw.arguments, str):
            arguments = raw.arguments
        elif raw.arguments is None:
            arguments = ""
        else:
            arguments = dump_json(raw.arguments)
            problem = f"'arguments' is {json_type(raw.arguments)}, not a string holding JSON"
            deviations.append(problem)
            problems.append(problem)
        problem_text = None
        if problems:
            problem_text = (
                "Error: this tool call is malformed: "
                + "; ".join(problems)
                + '. Call a tool as {"type": "function", "function": {"name": "<tool>", "arguments": '
                '"<a JSON object encoded as a string>"}}.'
            )
        calls.append(ToolCall(call_id, name, arguments, deviations=deviations, problem=problem_text))
    return calls
