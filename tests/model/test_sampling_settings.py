"""top_p and seed: sent by both clients when set, absent from the request when not (issue 11, item 7)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from proctor.agent.inputs.config import ModelConfig
from proctor.agent.model.factory import make_client
from proctor.agent.model.retry import RetryPolicy
from proctor.agent.run.config_loader import RunFlags, load_run_config
from tests.support.scripted_server import Reply, ScriptedServer

REPO = Path(__file__).resolve().parents[2]
QUESTION = [{"role": "user", "content": "Give \\boxed{1}."}]
NO_RETRY = RetryPolicy(max_retries=0)


async def _first_body(api: str, **settings: Any) -> dict[str, Any]:
    with ScriptedServer([Reply(content="\\boxed{1}")]) as server:
        config = ModelConfig(name="openai/m", base_url=server.base_url, api=api, **settings)  # type: ignore[arg-type]
        client = make_client(config, retry_policy=NO_RETRY)
        await client.complete(QUESTION, max_output_tokens=32_768)
        await client.aclose()
    return server.requests[0].json


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_top_p_and_seed_reach_the_request_body(api: str) -> None:
    body = await _first_body(api, temperature=0.6, top_p=0.95, seed=1234)
    assert (body["temperature"], body["top_p"], body["seed"]) == (0.6, 0.95, 1234)


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_unset_sampling_settings_are_never_sent(api: str) -> None:
    body = await _first_body(api)
    # The provider's defaults apply: no null, no zero, no key at all.
    assert not {"temperature", "top_p", "seed"} & body.keys()


async def test_seed_zero_is_a_seed_not_unset() -> None:
    body = await _first_body("chat", seed=0)
    assert body["seed"] == 0 and "top_p" not in body


@pytest.mark.parametrize("bad", [{"top_p": 0}, {"top_p": 1.5}, {"top_p": float("nan")}, {"seed": "x"}])
def test_bad_sampling_settings_are_config_errors(bad: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        ModelConfig(name="openai/m", **bad)


def test_phybench_example_samples_as_the_paper_ran_local_models() -> None:
    config = load_run_config(REPO / "configs" / "examples" / "phybench-local.yaml", RunFlags())
    assert config.track == "phybench"
    [model] = config.models
    assert (model.temperature, model.top_p) == (0.6, 0.95)
    assert config.budget.max_output_tokens == 32_768
    assert config.track_options.get("eed_mode", "strict") == "strict"
