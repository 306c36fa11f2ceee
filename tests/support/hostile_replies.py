"""Hypothesis strategies for what a broken or hostile OpenAI-compatible server may reply.

A drawn :class:`ReplySpec` is rendered as a Chat Completions or a Responses body (whichever
the request asked for) and sent verbatim by the scripted server, so the real SDK and the
real clients see it exactly as they would from the wire.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from tests.support.scripted_server import HttpError, RawReply, Step

# Fragments a hostile model would try: lone surrogates, NUL and control bytes, markers the
# graders look for, HTML that must not escape the report, bidi overrides, huge numbers.
FRAGMENTS = [
    "\ud800",
    "\udfff",
    "\ud83d",
    "\x00",
    "\x1b[31m",
    "\r\n",
    "\u202e",
    "\ufeff",
    "</script><script>alert(1)</script>",
    "FINAL ANSWER: 5",
    "FINAL ANSWER: 3 or 4",
    "\\boxed{x}",
    "\\boxed{2mg \\mp 4}",
    "\\boxed{",
    "VERDICT: CORRECT",
    "VERDICT: 7",
    "9" * 3000,
    "\\frac{" * 50,
    "😀",
    '"}]}',
]

any_char = st.characters(exclude_categories=())  # surrogates (category Cs) included
texts = st.lists(st.one_of(st.text(any_char, max_size=40), st.sampled_from(FRAGMENTS)), max_size=6).map(
    "".join
)
# Big strings are cheap to draw: one repeated fragment.
big_texts = st.builds(
    lambda piece, size: (piece * (size // max(1, len(piece)) + 1))[:size],
    texts.filter(bool),
    st.sampled_from([1_000, 65_536]),
)

json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), texts),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(texts, inner, max_size=3)),
    max_leaves=8,
)

CODE = ["print(1)", "def answer():\n    return 1", "def answer(): return 'x\ud800'", "import os"]
arguments = st.one_of(
    st.sampled_from(CODE).map(lambda code: json.dumps({"code": code})),
    st.builds(lambda code: {"code": code}, st.sampled_from(CODE)),  # an object, not a string
    texts,  # usually not JSON
    json_values,
    st.just("[" * 100_000),
    st.just('{"code": ' + "9" * 5000 + "}"),
    st.just('{"code": 5}'),
    st.just('{"code": "print(1)", "extra": 1}'),
)
names = st.one_of(st.sampled_from(["python", "submit_answer", "", "nope"]), st.none(), st.integers(), texts)
ids = st.one_of(st.sampled_from(["call_1", "dup", "dup"]), st.none(), st.integers(), st.just("x" * 1000))


@dataclass
class CallSpec:
    id: Any
    name: Any
    arguments: Any
    type: Any = "function"
    has_function: bool = True


calls = st.builds(
    CallSpec,
    id=ids,
    name=names,
    arguments=arguments,
    type=st.one_of(st.just("function"), st.just("function"), st.none(), st.just("custom")),
    has_function=st.sampled_from([True, True, True, False]),
)


@dataclass(repr=False)
class ReplySpec:
    content: Any = None
    calls: list[CallSpec] = field(default_factory=list)
    usage: Any = "ok"
    finish_reason: Any = "stop"
    no_choices: bool = False
    refusal: str | None = None
    # Other kinds of step than a 200 reply with a body.
    special: str | None = None

    def __repr__(self) -> str:
        # Falsifying examples may hold megabytes; show their shape, not their bytes.
        def short(value: Any) -> str:
            text = repr(value)
            return text if len(text) <= 300 else f"{text[:200]}...<{len(text):,} chars>"

        fields = ", ".join(f"{name}={short(getattr(self, name))}" for name in self.__dataclass_fields__)
        return f"ReplySpec({fields})"


contents = st.one_of(
    texts,
    big_texts,
    st.none(),
    st.lists(
        st.one_of(st.fixed_dictionaries({"type": st.just("text"), "text": texts}), json_values), max_size=3
    ),
    json_values,
)
usages = st.one_of(
    st.just("ok"),
    st.none(),
    st.fixed_dictionaries({"prompt_tokens": json_values, "completion_tokens": json_values}),
    json_values,
)
replies = st.builds(
    ReplySpec,
    content=contents,
    calls=st.lists(calls, max_size=3),
    usage=usages,
    finish_reason=st.one_of(st.sampled_from(["stop", "length", "tool_calls", "content_filter"]), json_values),
    no_choices=st.sampled_from([False, False, False, True]),
    refusal=st.one_of(st.none(), texts),
    special=st.one_of(
        st.none(),
        st.none(),
        st.none(),
        st.sampled_from(["http_500", "bad_json", "bad_escape", "not_object", "deep_body", "bignum_body"]),
    ),
)


def _usage(spec: ReplySpec, chat: bool) -> Any:
    if spec.usage == "ok":
        return (
            {"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70}
            if chat
            else {"input_tokens": 50, "output_tokens": 20, "total_tokens": 70}
        )
    return spec.usage


def chat_body(spec: ReplySpec) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": spec.content}
    if spec.refusal is not None:
        message["refusal"] = spec.refusal
    if spec.calls:
        message["tool_calls"] = [
            {
                "id": c.id,
                "type": c.type,
                **({"function": {"name": c.name, "arguments": c.arguments}} if c.has_function else {}),
            }
            for c in spec.calls
        ]
    body: dict[str, Any] = {"id": "x", "object": "chat.completion", "created": 0, "model": "m"}
    body["choices"] = (
        [] if spec.no_choices else [{"index": 0, "message": message, "finish_reason": spec.finish_reason}]
    )
    if spec.usage is not None:
        body["usage"] = _usage(spec, chat=True)
    return body


def responses_body(spec: ReplySpec) -> dict[str, Any]:
    output: list[Any] = []
    if spec.content is not None:
        part = {"type": "output_text", "text": spec.content, "annotations": []}
        output.append({"type": "message", "role": "assistant", "content": [part]})
    if spec.refusal is not None:
        output.append({"type": "message", "content": [{"type": "refusal", "refusal": spec.refusal}]})
    for c in spec.calls:
        output.append({"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments})
    body: dict[str, Any] = {
        "id": "r",
        "object": "response",
        "created_at": 0,
        "model": "m",
        "status": "incomplete" if spec.finish_reason == "length" else "completed",
        "output": [] if spec.no_choices else output,
    }
    if spec.usage is not None:
        body["usage"] = _usage(spec, chat=False)
    return body


def render(spec: ReplySpec, request: dict[str, Any]) -> Step:
    if spec.special == "http_500":
        return HttpError(500, "scripted outage")
    if spec.special == "bad_json":
        return RawReply(raw=b'{"choices": [')
    if spec.special == "bad_escape":
        return RawReply(
            raw=b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": "a\\qb\\ud800"}}]}'
        )
    if spec.special == "deep_body":
        return RawReply(raw=b'{"choices": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    if spec.special == "bignum_body":
        return RawReply(raw=b'{"choices": [], "usage": {"prompt_tokens": ' + b"9" * 5000 + b"}}")
    if spec.special == "not_object":
        return RawReply(body=["not", "an", "object"])
    return RawReply(body=responses_body(spec) if "input" in request else chat_body(spec))


class ReplyPlan:
    """The replies of one fuzz example, served in order (cycling) to whoever asks."""

    def __init__(self) -> None:
        self.replies: list[ReplySpec] = []
        self.calls = 0
        self._lock = threading.Lock()  # the server answers from several threads

    def reset(self, replies: list[ReplySpec]) -> None:
        with self._lock:
            self.replies, self.calls = replies or [ReplySpec(content="")], 0

    def __call__(self, request: dict[str, Any], index: int) -> Step:
        with self._lock:
            spec = self.replies[self.calls % len(self.replies)]
            self.calls += 1
        return render(spec, request)
