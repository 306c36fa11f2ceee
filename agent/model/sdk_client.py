"""What both OpenAI-API clients share: endpoint, retries, connection limit and the SDK's post."""

from __future__ import annotations

import asyncio
import json
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import openai

from proctor.agent.inputs.config import ModelConfig
from proctor.agent.model.base import ChatResponse, ModelError, ProviderRefusal
from proctor.agent.model.endpoint import Endpoint, without_secrets
from proctor.agent.model.history import HistoryView, view_of
from proctor.agent.model.provider_outcome import ProviderVerdict, classify_error, classify_finish
from proctor.agent.model.reply_shapes import field_of
from proctor.agent.model.retry import FailedReply, RetryCallback, RetryPolicy, call_with_retries
from proctor.agent.text.encodable import Replacements, make_encodable, safe_text


def not_a_reply(reply: Any, defining_field: str) -> str | None:
    """Why a 200 body is not a reply of the API at all, or None when it is one.

    Such a body (an ``{"error": ...}`` object sent with status 200, a bare string, list or number,
    an event stream to a request that asked for none) says the endpoint failed; reading it as an
    empty answer would score the model for a reply it never gave. A reply that only misses or
    mangles fields stays a reply with deviations (agent/model/reply_shapes.py).
    """
    if reply is None or isinstance(reply, str | int | float | bool | list):
        kind = "empty" if reply is None else type(reply).__name__
        return f"HTTP 200 with a body that is not a reply ({kind})"
    if field_of(reply, defining_field) is None:
        error = field_of(reply, "error")
        if error is not None:
            message = field_of(error, "message") if not isinstance(error, str) else error
            text = str(message if message is not None else error)
            return f"HTTP 200 with an error body: {safe_text(text[:300])}"
    return None


def refusal_in_body(reply: Any, defining_field: str) -> ProviderVerdict | None:
    """The refusal a 200 error body states (agent/model/provider_outcome.py), if any."""
    if field_of(reply, defining_field) is not None:
        return None
    error = field_of(reply, "error")
    if error is None:
        return None
    if not isinstance(error, dict | str):
        # An SDK object: its fields as a plain mapping, one level deep.
        error = {
            name: field_of(error, name) for name in ("code", "type", "message", "metadata", "innererror")
        }
    return classify_error(200, {"error": error})


class JsonReply(openai.BaseModel):
    """The type the SDK's post is told to parse a reply into, which leaves it as decoded JSON.

    The SDK builds its typed reply objects without validating them (``construct``), so they hold
    whatever the server sent and agent/model/reply_shapes.py checks every field it reads either
    way; building them (a model per choice, message and call, a pydantic union validation per
    tool call) cost ~0.3 ms a turn for nothing. The SDK hands the decoded body to a cast type's
    ``build`` hook (its ``ModelBuilderProtocol``), everything else about the exchange
    (status errors, content types, JSON decoding) stays the SDK's. An SDK without that hook
    constructs this model instead, with the reply's top-level fields as its attributes, which
    ``field_of`` reads just the same.
    """

    @classmethod
    def build(cls, *, response: Any, data: object) -> Any:
        return data


class SdkClient(ABC):
    """A ModelClient whose API differs only in request shape, path and response parsing."""

    # The API path posted to, the SDK type the reply is parsed into, and the field every reply
    # of that API has (``choices``, ``output``).
    path: ClassVar[str]
    reply_type: ClassVar[type]
    reply_field: ClassVar[str]

    def __init__(
        self,
        cfg: ModelConfig,
        *,
        base_url_override: str | None = None,
        on_retry: RetryCallback | None = None,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        self.cfg = cfg
        self.model = cfg.name
        self.endpoint = Endpoint.from_config(cfg, base_url_override)
        # The URL as errors (and so records) name it: never with user:password or a key in it.
        self.shown_url = without_secrets(self.endpoint.base_url)
        self.on_retry = on_retry
        self.retry_policy = retry_policy or RetryPolicy(max_retries=cfg.max_retries)
        self._sdk = self.endpoint.sdk_client()

    # ``view`` below is the conversation's history as this request reads it (agent/model/history.py),
    # taken once per request; None for a plain list of messages.

    @abstractmethod
    def _request(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        tool_choice: str | dict[str, Any] | None,
        max_output_tokens: int | None,
        view: HistoryView | None = None,
    ) -> dict[str, Any]: ...

    @abstractmethod
    def _to_response(
        self,
        reply: Any,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        retries: int,
        view: HistoryView | None = None,
    ) -> ChatResponse: ...

    def _encoded(self, request: dict[str, Any], view: HistoryView | None) -> bytes | None:
        """``request`` as the SDK would encode it, built faster; None leaves it to the SDK."""
        return None

    async def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        max_output_tokens: int | None = None,
    ) -> ChatResponse:
        # One check of the history's cached prefix per request: the request's messages, their
        # JSON and the reply's token floor all read this view.
        view = view_of(messages)
        request = self._request(messages, tools, tool_choice, max_output_tokens, view)
        semaphore = self.endpoint.semaphore()

        body = request
        # The same bytes the SDK would send, from the history's cached encodings. Any body
        # that does not encode cleanly (a lone surrogate, a value JSON cannot hold) goes to
        # the SDK as before, which fails or recovers in the same way as without this.
        try:
            encoded = self._encoded(request, view)
        except Exception:  # an optimisation only: whatever it cannot encode, the SDK does
            encoded = None

        async def attempt() -> Any:
            try:
                reply = await post()
            except json.JSONDecodeError as exc:
                # The endpoint answered 200 with a body that is not JSON: its failure, not ours.
                raise ModelError(
                    f"{self.shown_url}: the reply is not valid JSON ({exc.msg} at character {exc.pos})"
                ) from exc
            except RecursionError as exc:
                raise ModelError(f"{self.shown_url}: the reply is nested too deeply to read") from exc
            except ValueError as exc:
                # JSON Python will not hold (integers of more than 4,300 digits), bytes not UTF-8.
                reason = str(exc).split(";")[0][:300]
                raise ModelError(f"{self.shown_url}: the reply cannot be read ({reason})") from exc
            problem = not_a_reply(reply, self.reply_field)
            if problem is not None:
                # OpenRouter reports a failure after the model started as a 200 error body.
                raise FailedReply(problem, verdict=refusal_in_body(reply, self.reply_field))
            return reply

        async def post() -> Any:
            nonlocal body
            async with semaphore:
                # The SDK's generic post: same transport, errors and typed parsing as the typed
                # create() methods, minus their per-field request transform, which costs ~0.5 ms
                # per message and would grow each turn with the conversation.
                try:
                    return await self._post_within_deadline(body, encoded)
                except UnicodeEncodeError:
                    # The history holds text UTF-8 cannot carry (a lone surrogate a model sent,
                    # now quoted back). Raised before anything is sent; the text goes out with
                    # the store's replacement rule (\uXXXX) instead. Checked only on failure,
                    # so well-formed histories pay nothing.
                    body = make_encodable(request, Replacements())
                    return await self._post_within_deadline(body)

        reply, retries = await call_with_retries(
            attempt,
            policy=self.retry_policy,
            endpoint=self.shown_url,
            key_env=self.cfg.api_key_env,
            on_retry=self.on_retry,
        )
        response = self._to_response(reply, messages, tools, retries, view)
        verdict = classify_finish(response.finish_reason, bool(response.tool_calls))
        if verdict is not None:
            raise ProviderRefusal(self.shown_url, verdict)
        return response

    async def _post_within_deadline(self, body: dict[str, Any], encoded: bytes | None = None) -> Any:
        """The SDK's post, bounded as a whole by the request timeout.

        The HTTP library's timeout bounds each read, so a server that sends its reply a byte
        at a time (slow-loris) would hold a sample for ever; this deadline covers the whole
        exchange, headers to last byte (the wait for a connection slot is not counted).
        """
        try:
            async with asyncio.timeout(self.endpoint.timeout_s):
                if encoded is not None:
                    return await self._sdk.post(self.path, cast_to=self.reply_type, content=encoded)
                return await self._sdk.post(self.path, cast_to=self.reply_type, body=body)
        except TimeoutError:
            raise FailedReply("timeout", f"no whole reply within {self.endpoint.timeout_s:g} s") from None

    async def aclose(self) -> None:
        await self._sdk.close()
