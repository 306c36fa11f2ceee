"""The model and judge clients of a run (or a re-score), each wrapped in the run's guard, and a
local llama.cpp server for every ``local/...`` model that names no base URL."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from proctor.agent.inputs.config import ModelConfig
from proctor.agent.model.base import ModelClient
from proctor.agent.run.guard import GuardedClient, RunGuard


@contextlib.asynccontextmanager
async def _local_server(model: ModelConfig) -> AsyncIterator[str]:
    """Start llama.cpp for a ``local/...`` model and yield its OpenAI-compatible base URL."""
    # Imported here: only runs with local models pay for it.
    from proctor.agent.model.local_server import local_model_server

    async with local_model_server(model.name) as base_url:
        yield base_url


async def open_clients(
    stack: contextlib.AsyncExitStack,
    labelled: list[tuple[str, ModelConfig]],
    judge: ModelConfig | None,
    guard: RunGuard,
) -> tuple[dict[str, ModelClient], ModelClient | None]:
    """Every client counts its retries into the running sample and trips ``guard`` on a refusal."""
    from proctor.agent.model.factory import make_client

    local_urls: dict[str, str] = {}

    async def client_for(model: ModelConfig, role: str) -> ModelClient:
        override = None
        if model.name.startswith("local/") and model.base_url is None:
            if model.name not in local_urls:
                local_urls[model.name] = await stack.enter_async_context(_local_server(model))
            override = local_urls[model.name]
        client = make_client(model, base_url_override=override, on_retry=guard.retry_callback(role))
        stack.push_async_callback(client.aclose)
        return GuardedClient(client, guard, role)

    clients = {label: await client_for(model, "model") for label, model in labelled}
    judge_client = await client_for(judge, "judge") if judge is not None else None
    return clients, judge_client
