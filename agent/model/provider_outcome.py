"""Which provider failures are the model's own outcome, and which are the infrastructure's.

A provider that refuses the model's own conversation has answered: the conversation grew past
the model's context, or the provider's policy blocked it. Running the sample again sends the
same conversation and meets the same answer, and leaving it out of the score would raise
accuracy by dropping exactly the samples a model did worst on. Such a failure ends the sample
as ``provider_refusal`` (scored 0, counted in accuracy, kept by ``--resume``), with the
provider's code and message recorded. Everything else the endpoint does wrong (5xx and
timeouts after retries, refused keys, spent quota, a request it calls malformed) says nothing
about the model: ``model_error``, left out of accuracy and run again by ``--resume``.

The decision reads the error body, never the status alone: a 403 is a refused key at most
providers but OpenRouter's moderation verdict when its body names what was flagged, and a 400
is a context overflow or a refusal only when the body says so (a 400 for an unknown parameter
is a configuration fault and stays an error). The shapes are those the providers document or
send (docs/models.md, "Provider refusals", has the table and the test of each row).

The body comes from the endpoint, which may be hostile: only a few fixed fields are read, and
what is recorded is bounded and stripped of control and format characters.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from proctor.agent.text.encodable import safe_text

# What a record keeps of the provider's text.
MAX_MESSAGE_CHARS = 500
MAX_CODE_CHARS = 80


class RefusalKind(StrEnum):
    # The conversation no longer fits the model's context window.
    CONTEXT_OVERFLOW = "context_overflow"
    # The provider's policy refused the prompt (OpenAI invalid_prompt, OpenRouter moderation).
    REFUSED = "refused"
    # A content filter blocked the prompt or the reply (Azure's content_filter).
    CONTENT_FILTER = "content_filter"


@dataclass(frozen=True)
class ProviderVerdict:
    """The provider's answer to the conversation, as recorded: bounded, sanitised text."""

    kind: RefusalKind
    # The HTTP status (200 for a reply whose body or finish_reason carried the refusal).
    status: int
    # The provider's own code for it (``context_length_exceeded``, ``content_filter``...).
    code: str | None
    message: str

    def describe(self) -> str:
        code = f" {self.code}" if self.code else ""
        what = f"{self.kind.value}; HTTP {self.status}{code}"
        return f"the provider refused the conversation ({what}): {self.message}"


# Error codes (``error.code`` or ``error.type``) that name the kind by themselves.
_CODE_KINDS: dict[str, RefusalKind] = {
    # OpenAI; OpenRouter passes the provider's code on.
    "context_length_exceeded": RefusalKind.CONTEXT_OVERFLOW,
    # llama.cpp's server (``type``).
    "exceed_context_size_error": RefusalKind.CONTEXT_OVERFLOW,
    # OpenAI: a prompt flagged as violating the usage policy; an image request refused.
    "invalid_prompt": RefusalKind.REFUSED,
    "content_policy_violation": RefusalKind.REFUSED,
    # Azure OpenAI: the prompt triggered the content filter (``innererror.code`` says why).
    "content_filter": RefusalKind.CONTENT_FILTER,
    "responsibleaipolicyviolation": RefusalKind.CONTENT_FILTER,
}

# Messages that say the context overflowed, for servers whose code says nothing (vLLM sends
# ``BadRequestError``/400; OpenRouter relays the upstream text). Each phrase names the context
# window or the prompt's own size, so an unrelated 400 (a bad parameter, "max_tokens is too
# large", an output maximum) never matches. The providers' documented texts:
# - vLLM, DeepSeek: "This model's maximum context length is N tokens. However, you requested ...";
# - llama.cpp: "the request exceeds the available context size";
# - Anthropic (and its OpenAI SDK compatibility): "prompt is too long: N tokens > M maximum",
#   "input length and `max_tokens` exceed context limit: P + M > L, decrease input length or
#   `max_tokens` and try again";
# - Gemini (its OpenAI-compatible endpoint relays it): "The input token count (N) exceeds the
#   maximum number of tokens allowed (M).";
# - xAI: "This model's maximum prompt length is N but the request contains M tokens.";
# - Hugging Face TGI (422): "Input validation error: `inputs` tokens + `max_new_tokens` must be
#   <= N" and "`inputs` must have less than N tokens".
_OVERFLOW_MESSAGE = re.compile(
    r"maximum context length|exceeds? the available context size|context[ _]length[ _]exceeded"
    r"|context window (?:is )?(?:exceeded|full)|prompt is too long"
    r"|input length and .{0,3}max_tokens.{0,3} exceed context limit"
    r"|input token count(?: \(\d+\))? exceeds the maximum number of tokens"
    r"|maximum prompt length is \d+"
    r"|inputs.{0,3} tokens \+ .{0,3}max_new_tokens.{0,3} must be <="
    r"|inputs.{0,3} must have less than \d+ tokens",
    re.IGNORECASE,
)

# Statuses whose body is read at all. 401 and 402 are credentials and credit whatever the body
# says; 408, 429 and 5xx are transient (retried, then an error).
_READ_STATUSES = frozenset({200, 400, 403, 413, 422})
# HTTP 413 (Content Too Large) refuses the request for its size, whatever body a gateway or
# proxy in front of the model sends: the conversation has outgrown what the endpoint takes, and
# sending it again meets the same answer.
_TOO_LARGE_STATUS = 413


def clean_text(value: Any, limit: int) -> str:
    """``value`` as bounded text without control or format characters (a hostile endpoint
    could send terminal escapes or bidi overrides into summaries and reports)."""
    text = value if isinstance(value, str) else str(value)
    text = text[: limit * 2]
    text = "".join(" " if unicodedata.category(ch)[0] == "C" else ch for ch in text)
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return safe_text(text)


def _mapping(value: Any) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


def _word(value: Any) -> str | None:
    """A code or type as a short lowercase word; numbers (OpenRouter's ``code: 400``) give None."""
    if isinstance(value, str) and 0 < len(value) <= 200:
        return value.strip().lower()
    return None


def error_object(body: Any) -> Mapping[str, Any] | None:
    """The error object of a body: ``{"error": {...}}`` (OpenAI, Azure, llama.cpp, OpenRouter),
    the body itself when flat (vLLM: ``{"object": "error", "message": ...}``; also what the SDK
    keeps of a nested one), or a bare string as the message."""
    if isinstance(body, str):
        return {"message": body}
    if isinstance(body, list | tuple) and body:
        # Google's endpoints wrap the error object in a list: [{"error": {...}}].
        body = body[0]
    outer = _mapping(body)
    if outer is None:
        return None
    inner = _mapping(outer.get("error"))
    if inner is not None:
        return inner
    if isinstance(outer.get("error"), str):
        return {"message": outer["error"]}
    return outer if "message" in outer or "code" in outer or "type" in outer else None


def classify_error(status: int, body: Any) -> ProviderVerdict | None:
    """The model's outcome this error body states, or None when it is the infrastructure's."""
    if status not in _READ_STATUSES:
        return None
    error = error_object(body)
    if error is None:
        if status == _TOO_LARGE_STATUS:
            return ProviderVerdict(
                kind=RefusalKind.CONTEXT_OVERFLOW,
                status=status,
                code="http_413",
                message=clean_text(
                    body if isinstance(body, str) and body else "(no message)", MAX_MESSAGE_CHARS
                ),
            )
        return None
    message_value = error.get("message")
    message = message_value if isinstance(message_value, str) else ""
    code = _word(error.get("code"))
    type_ = _word(error.get("type"))
    inner = _mapping(error.get("innererror")) or _mapping(error.get("inner_error"))
    inner_code = _word(inner.get("code")) if inner is not None else None
    metadata = _mapping(error.get("metadata"))

    kind: RefusalKind | None = None
    for word in (code, type_, inner_code):
        if word is not None and word in _CODE_KINDS:
            kind = _CODE_KINDS[word]
            break
    if kind is None and metadata is not None and ("flagged_input" in metadata or "reasons" in metadata):
        # OpenRouter's moderation: the metadata names the flagged input and the reasons.
        kind = RefusalKind.REFUSED
    if kind is None and status != 403 and _OVERFLOW_MESSAGE.search(message[:2_000]):
        kind = RefusalKind.CONTEXT_OVERFLOW
    if kind is None and status == _TOO_LARGE_STATUS:
        kind = RefusalKind.CONTEXT_OVERFLOW
        code = code or "http_413"
    if kind is None:
        return None
    shown_code = code or type_ or inner_code
    if inner_code and inner_code != shown_code:
        shown_code = f"{shown_code}/{inner_code}" if shown_code else inner_code
    return ProviderVerdict(
        kind=kind,
        status=status,
        code=clean_text(shown_code, MAX_CODE_CHARS) if shown_code else None,
        message=clean_text(message or "(no message)", MAX_MESSAGE_CHARS),
    )


def classify_finish(finish_reason: str | None, has_tool_calls: bool) -> ProviderVerdict | None:
    """A 200 reply the provider's content filter cut off (``finish_reason: content_filter``;
    the Responses API's ``incomplete`` with reason ``content_filter``). A reply that still calls a
    tool is the model's move and goes on as usual."""
    if finish_reason != "content_filter" or has_tool_calls:
        return None
    return ProviderVerdict(
        kind=RefusalKind.CONTENT_FILTER,
        status=200,
        code="finish_reason: content_filter",
        message="the provider's content filter withheld the reply",
    )
