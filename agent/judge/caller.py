"""Asking the judge model, retrying when its reply cannot be parsed.

Each attempt is a fresh single-turn request with the same filled prompt: the judge sees no
earlier reply, so one malformed answer cannot steer the next. Every reply is kept, parsed or
not. Transport failures are the client's business (it retries 429/5xx itself); when it gives
up with ``ModelError`` the grading stops and the caller records a judge error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import openai

from proctor.agent.judge.verdict import VerdictParseError
from proctor.agent.model.base import EndpointRefused, ModelClient, ModelError, ProviderRefusal, Usage

VerdictT = TypeVar("VerdictT")


@dataclass
class JudgeResult(Generic[VerdictT]):
    """What the judge said: the verdict, or why there is none."""

    verdict: VerdictT | None
    replies: list[str] = field(default_factory=list)
    parse_errors: list[str] = field(default_factory=list)
    model_error: str | None = None
    # The endpoint answered, but refused this request's content for good (HTTP 400/413/422...:
    # say, more than its context holds), as opposed to an outage or a refused key.
    request_rejected: bool = False
    # The endpoint refuses every request until a person acts (credentials, quota): nothing any
    # other request could show.
    endpoint_refused: bool = False
    usage: list[Usage] = field(default_factory=list)
    transport_retries: int = 0

    @property
    def error(self) -> str | None:
        if self.verdict is not None:
            return None
        if self.model_error is not None:
            return f"judge model failed: {self.model_error}"
        attempts = len(self.replies)
        last = self.parse_errors[-1] if self.parse_errors else "no reply"
        return f"judge reply unparseable after {attempts} attempt(s): {last}"


async def ask_judge(
    judge: ModelClient,
    prompt: str,
    parse: Callable[[str | None], VerdictT],
    *,
    parse_retries: int = 2,
    max_output_tokens: int | None = None,
) -> JudgeResult[VerdictT]:
    """Send ``prompt`` up to ``1 + parse_retries`` times until ``parse`` accepts a reply."""
    result: JudgeResult[VerdictT] = JudgeResult(verdict=None)
    for _attempt in range(1 + max(0, parse_retries)):
        try:
            response = await judge.complete(
                [{"role": "user", "content": prompt}], max_output_tokens=max_output_tokens
            )
        except ModelError as exc:
            result.model_error = str(exc) or type(exc).__name__
            result.request_rejected = _rejected_for_its_content(exc)
            result.endpoint_refused = isinstance(exc, EndpointRefused)
            return result
        reply = response.content or ""
        result.replies.append(reply)
        result.usage.append(response.usage)
        result.transport_retries += response.retries
        try:
            result.verdict = parse(reply)
        except VerdictParseError as exc:
            result.parse_errors.append(str(exc))
            continue
        return result
    return result


def _rejected_for_its_content(error: ModelError) -> bool:
    """A final 4xx other than a refused key or quota, or the provider's refusal of this
    conversation (a content-filtered reply included): the request itself was refused."""
    if isinstance(error, ProviderRefusal):
        return True
    if isinstance(error, EndpointRefused):
        return False
    cause = error.__cause__
    return (
        isinstance(cause, openai.APIStatusError)
        and 400 <= cause.status_code < 500
        and cause.status_code != 429
    )
