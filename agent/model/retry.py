"""Our retry policy for model calls: which failures are transient, and how long to wait.

The SDK's own retries are switched off so every retry passes through here, is counted in
``ChatResponse.retries`` and reported to the progress display.

Retried: 408, 429 (rate limits), 5xx, timeouts and dropped connections.
Never retried: a provider's refusal of the conversation itself (context overflow, policy
refusal, content filter: ``ProviderRefusal``, read from the body by
agent/model/provider_outcome.py), 401/403 (credentials) and 429 ``insufficient_quota``
(billing) — waiting cannot fix those — and other 4xx, which mean the request itself is wrong.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import openai

from proctor.agent.model.base import EndpointRefused, ModelError, ProviderRefusal
from proctor.agent.model.provider_outcome import ProviderVerdict, classify_error, clean_text, error_object

T = TypeVar("T")
RetryCallback = Callable[[str], None]

RETRYABLE_STATUS = frozenset({408, 429})


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 6
    # First backoff; doubles per retry up to max_delay_s. Tests shrink it to milliseconds.
    base_delay_s: float = 1.0
    max_delay_s: float = 60.0
    # A server asking for a longer wait than this is obeyed only up to this long.
    max_retry_after_s: float = 300.0

    def backoff(self, retry_number: int, rng: random.Random | None = None) -> float:
        """Exponential backoff with "equal jitter": half fixed, half random, so a crowd of
        samples hit by the same 429 does not come back in lockstep."""
        ceiling = min(self.max_delay_s, self.base_delay_s * (2**retry_number))
        return ceiling / 2 + (rng or random).uniform(0, ceiling / 2)


@dataclass(frozen=True)
class Transient:
    """A failure worth retrying; ``retry_after_s`` is the server's requested wait, if any."""

    reason: str
    retry_after_s: float | None = None


class FailedReply(Exception):
    """The endpoint failed without an HTTP error: no whole reply within the request's time
    limit, or a 200 whose body is an error or not a reply at all. Retried like a 5xx, and a
    ``model_error`` when the retries run out: the endpoint failed, not the model. A 200 error
    body that refuses the conversation itself carries ``verdict`` and is not retried."""

    def __init__(
        self, reason: str, detail: str | None = None, verdict: ProviderVerdict | None = None
    ) -> None:
        super().__init__(f"{reason} ({detail})" if detail else reason)
        # ``reason`` is what a retry line says ("timeout", as for the HTTP library's own).
        self.reason = reason
        self.detail = detail
        self.verdict = verdict


def parse_retry_after(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds the server asked us to wait: ``retry-after-ms``, or ``Retry-After`` as seconds or
    an HTTP date. None when absent or unreadable."""
    if not headers:
        return None
    lowered = {k.lower(): v for k, v in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _error_field(error: openai.APIStatusError, name: str) -> str | None:
    """`code` or `type` from the OpenAI error body, wherever the SDK left it."""
    direct = getattr(error, name, None)
    if isinstance(direct, str):
        return direct
    body: Any = error.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get(name), str):
            return str(inner[name])
    return None


# What an error line keeps of the server's message: the endpoint may be hostile, and the text
# ends up in records, summaries and the terminal.
MAX_SERVER_MESSAGE_CHARS = 2_000


def _server_message(error: openai.APIStatusError) -> str:
    """The server's own message: from the error object wherever the body keeps it (nested,
    flat, a bare string, or Google's list-wrapped ``[{"error": {...}}]``), else the SDK's."""
    text = str(error.message)
    found = error_object(error.body)
    if found is not None and isinstance(found.get("message"), str) and found["message"]:
        text = found["message"]
    return clean_text(text, MAX_SERVER_MESSAGE_CHARS)


def classify(error: BaseException, endpoint: str, key_env: str = "the API key variable") -> Transient:
    """Return how to retry ``error``, or raise ModelError when it must not be retried."""
    if isinstance(error, FailedReply):
        if error.verdict is not None:
            raise ProviderRefusal(endpoint, error.verdict) from error
        return Transient(error.reason)
    if isinstance(error.__cause__, FailedReply):
        # Raised inside the HTTP client (agent/model/bounded_reply.py); the SDK wraps it.
        return Transient(error.__cause__.reason)
    if isinstance(error, openai.APITimeoutError):  # subclass of APIConnectionError: test first
        return Transient("timeout")
    if isinstance(error, openai.APIConnectionError):
        return Transient("connection error")
    if not isinstance(error, openai.APIStatusError):
        raise error
    status = error.status_code
    verdict = classify_error(status, error.body)
    if verdict is not None:
        # Read from the body before the status: OpenRouter's moderation verdict is a 403.
        raise ProviderRefusal(endpoint, verdict) from error
    message = _server_message(error)
    if status in (401, 403):
        raise EndpointRefused(
            f"{endpoint} refused the credentials (HTTP {status}): {message}. Check {key_env}.", kind="auth"
        ) from error
    if status == 429 and "insufficient_quota" in (_error_field(error, "code"), _error_field(error, "type")):
        raise EndpointRefused(
            f"{endpoint} reports the quota is exhausted (HTTP 429 insufficient_quota): {message}",
            kind="quota",
        ) from error
    if status in RETRYABLE_STATUS or status >= 500:
        label = "rate limited (429)" if status == 429 else f"HTTP {status}"
        return Transient(label, parse_retry_after(error.response.headers))
    raise ModelError(f"{endpoint} rejected the request (HTTP {status}): {message}") from error


async def call_with_retries(
    attempt: Callable[[], Awaitable[T]],
    *,
    policy: RetryPolicy,
    endpoint: str,
    key_env: str = "the API key variable",
    on_retry: RetryCallback | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> tuple[T, int]:
    """Run ``attempt`` until it succeeds; returns (result, retries used)."""
    retries = 0
    while True:
        try:
            return await attempt(), retries
        except (openai.APIConnectionError, openai.APIStatusError, FailedReply) as error:
            transient = classify(error, endpoint, key_env)
            if retries >= policy.max_retries:
                failed = error if isinstance(error, FailedReply) else error.__cause__
                if isinstance(failed, FailedReply):
                    detail = f" ({failed.detail})" if failed.detail else ""
                else:
                    detail = f" ({error})"
                raise ModelError(
                    f"{endpoint}: gave up after {retries} retries; last failure: {transient.reason}{detail}"
                ) from error
            if transient.retry_after_s is not None:
                # At least what the server asked, plus up to 10% so a crowd of samples told
                # the same wait does not return in one burst.
                wait = min(transient.retry_after_s, policy.max_retry_after_s) * random.uniform(1.0, 1.1)
            else:
                wait = policy.backoff(retries)
            retries += 1
            if on_retry is not None:
                on_retry(transient.reason)
            await sleep(wait)
