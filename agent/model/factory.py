"""Pick the client for a model config: Chat Completions or the Responses API."""

from __future__ import annotations

from proctor.agent.inputs.config import ModelConfig
from proctor.agent.model.api_choice import choose_api
from proctor.agent.model.base import ModelClient
from proctor.agent.model.openai_client import OpenAIChatClient
from proctor.agent.model.responses_client import OpenAIResponsesClient
from proctor.agent.model.retry import RetryCallback, RetryPolicy


def make_client(
    cfg: ModelConfig,
    *,
    base_url_override: str | None = None,
    on_retry: RetryCallback | None = None,
    retry_policy: RetryPolicy | None = None,
) -> ModelClient:
    """A client for ``cfg``. ``base_url_override`` points it elsewhere (e.g. the local llama.cpp
    server Proctor started); ``on_retry(reason)`` is called before each retry. The API is
    ``cfg.api``, or for ``auto`` the one :func:`choose_api` picks for the URL actually used."""
    if choose_api(cfg, base_url_override).api == "responses":
        return OpenAIResponsesClient(
            cfg, base_url_override=base_url_override, on_retry=on_retry, retry_policy=retry_policy
        )
    return OpenAIChatClient(
        cfg, base_url_override=base_url_override, on_retry=on_retry, retry_policy=retry_policy
    )
