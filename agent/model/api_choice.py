"""Which OpenAI API a model is spoken to with, when its config says ``api: auto`` (the default).

OpenAI's reasoning models keep their reasoning between tool turns only through the Responses
API: it returns the reasoning items encrypted and takes them back on the next request
(``responses_client.py``). Chat Completions drops them, so a reasoning model re-reasons from
nothing on every FrontierMath turn, which is not the setting its published scores used. The
rule, in full:

* ``api: chat`` or ``api: responses`` in the config (or ``-M api=...``) is used as stated.
* ``api: auto`` picks the Responses API when **both** hold:

  - the model is served by OpenAI itself: the base URL it talks to (its ``base_url``, else
    ``OPENAI_BASE_URL``, else the default) has the host ``api.openai.com``;
  - its name (after ``openai/``, case-insensitive) is one of OpenAI's reasoning models: the
    o-series (``o1``, ``o3``, ``o4-mini``, ``o3-pro``, dated snapshots such as
    ``o3-2025-04-16``), the GPT-5 family (``gpt-5``, ``gpt-5.2``, ``gpt-5-mini``,
    ``gpt-5-codex``, ``gpt-5-2025-08-07``), except its ``-chat`` variants
    (``gpt-5-chat-latest`` is ChatGPT's non-reasoning model), and ``codex-mini``.

  Everything else gets Chat Completions: self-hosted servers (vLLM, llama.cpp, Proctor's own
  local model), proxies and other providers (Azure OpenAI, OpenRouter), whose Responses support
  varies, and non-reasoning models, which have no reasoning to carry.

The choice and its reason go into run.json (``api_choices``) and ``--dry-run``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlparse

from proctor.agent.inputs.config import ModelConfig
from proctor.agent.model.endpoint import api_model_name, configured_base_url

OPENAI_API_HOST = "api.openai.com"
# o1, o3, o4-mini, o3-pro, o3-2025-04-16; not "o" alone, "omni-..." or "o10x".
_O_SERIES = re.compile(r"o[1-9][0-9]*(?:-|$)")
# gpt-5, gpt-5.2, gpt-5-mini, gpt-5.1-codex, gpt-5-2025-08-07; not gpt-50 or gpt-5-chat-latest.
_GPT_5 = re.compile(r"gpt-5(?:\.[0-9]+)?(?![0-9.])(?:$|-(?!chat))")
_CODEX_MINI = re.compile(r"codex-mini(?:-|$)")

Api = Literal["chat", "responses"]


@dataclass(frozen=True)
class ApiChoice:
    api: Api
    # "stated" (the config or -M named it) or "auto" (chosen by the rule above).
    source: Literal["stated", "auto"]
    reason: str

    def describe(self) -> str:
        return f"{self.api} ({self.source}: {self.reason})"

    def as_json(self) -> dict[str, str]:
        return {"api": self.api, "source": self.source, "reason": self.reason}


def is_openai_reasoning_model(name: str) -> bool:
    """Whether ``name`` (``openai/o3``, ``gpt-5.2``) is one of OpenAI's reasoning models."""
    base = api_model_name(name).lower()
    return any(pattern.match(base) for pattern in (_O_SERIES, _GPT_5, _CODEX_MINI))


def endpoint_host(cfg: ModelConfig, base_url_override: str | None = None) -> str:
    """The host ``cfg``'s requests go to; "" for Proctor's own local server."""
    return (urlparse(base_url_override or configured_base_url(cfg)).hostname or "").lower()


def choose_api(cfg: ModelConfig, base_url_override: str | None = None) -> ApiChoice:
    """The API ``cfg`` is spoken to with, and why (see the module docstring for the rule)."""
    if cfg.api != "auto":
        return ApiChoice(cfg.api, "stated", f"api: {cfg.api} in the config or -M api={cfg.api}")
    host = endpoint_host(cfg, base_url_override)
    if host != OPENAI_API_HOST:
        where = f"host {host}" if host else "Proctor's local llama.cpp server"
        return ApiChoice("chat", "auto", f"endpoint is not OpenAI's ({where})")
    if not is_openai_reasoning_model(cfg.name):
        return ApiChoice("chat", "auto", f"{api_model_name(cfg.name)} is not an OpenAI reasoning model")
    return ApiChoice(
        "responses",
        "auto",
        f"OpenAI reasoning model on {OPENAI_API_HOST}: the Responses API carries its reasoning between turns",
    )
