"""What both OpenAI-API clients share: endpoint, retries, connection limit and the SDK's post."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any, ClassVar

from proctor.agent.config import ModelConfig
from proctor.agent.encodable import Replacements, make_encodable
from proctor.agent.model.base import ChatResponse, ModelError
from proctor.agent.model.endpoint import Endpoint, without_secrets
from proctor.agent.model.retry import RetryCallback, RetryPolicy, call_with_retries


class SdkClient(ABC):
    """A ModelClient whose API differs only in request shape, path and response parsing."""

    # The API path posted to, and the SDK type the reply is parsed into.
    path: ClassVar[str]
    reply_type: ClassVar[type]

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

    @abstractmethod
    def _request(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        tool_choice: str | dict[str, Any] | None,
        max_output_tokens: int | None,
    ) -> dict[str, Any]: ...

    @abstractmethod
    def _to_response(
        self, reply: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, retries: int
    ) -> ChatResponse: ...

    async def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        max_output_tokens: int | None = None,
    ) -> ChatResponse:
        request = self._request(messages, tools, tool_choice, max_output_tokens)
        semaphore = self.endpoint.semaphore()

        body = request

        async def attempt() -> Any:
            try:
                return await post()
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

        async def post() -> Any:
            nonlocal body
            async with semaphore:
                # The SDK's generic post: same transport, errors and typed parsing as the typed
                # create() methods, minus their per-field request transform, which costs ~0.5 ms
                # per message and would grow each turn with the conversation.
                try:
                    return await self._sdk.post(self.path, cast_to=self.reply_type, body=body)
                except UnicodeEncodeError:
                    # The history holds text UTF-8 cannot carry (a lone surrogate a model sent,
                    # now quoted back). Raised before anything is sent; the text goes out with
                    # the store's replacement rule (\uXXXX) instead. Checked only on failure,
                    # so well-formed histories pay nothing.
                    body = make_encodable(request, Replacements())
                    return await self._sdk.post(self.path, cast_to=self.reply_type, body=body)

        reply, retries = await call_with_retries(
            attempt,
            policy=self.retry_policy,
            endpoint=self.shown_url,
            key_env=self.cfg.api_key_env,
            on_retry=self.on_retry,
        )
        return self._to_response(reply, messages, tools, retries)

    async def aclose(self) -> None:
        await self._sdk.close()
