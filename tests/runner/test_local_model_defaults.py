"""`--model local/gemma3-270m` alone gets limits a 270M model with an 8k context finishes under.

Issue 15: without the quickstart's small budget the local model ran 400 s without output
(the protocol's 1,000,000-token cap lets each reply fill the whole context).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from proctor.agent.inputs.config import (
    LOCAL_FORCE_SUBMIT_AT,
    LOCAL_MAX_OUTPUT_TOKENS_OTHER,
    LOCAL_TOKEN_CAP,
    ModelConfig,
    RunConfig,
)
from proctor.agent.model.local_server import CONTEXT_TOKENS
from proctor.agent.run.config_loader import RunFlags, load_run_config

LOCAL = "local/gemma3-270m"


def budget_of(config: RunConfig) -> tuple[int, int, int | None]:
    return config.budget.token_cap, config.budget.force_submit_at, config.budget.max_output_tokens


@pytest.fixture
def tasks(tmp_path: Path) -> Path:
    path = tmp_path / "t.jsonl"
    path.write_text('{"id": "a", "question": "q", "answer_type": "Python int", "answer": "1"}\n')
    return path


def test_the_bare_flag_gets_limits_inside_the_context_and_records_them(tasks: Path) -> None:
    config = load_run_config(None, RunFlags(tasks=tasks, models=[LOCAL]))
    assert budget_of(config) == (LOCAL_TOKEN_CAP, LOCAL_FORCE_SUBMIT_AT, 256)
    # The cumulative cap bounds every single request, so none can overflow the context.
    assert LOCAL_TOKEN_CAP + 1 <= CONTEXT_TOKENS
    assert config.models[0].max_connections == 1
    assert config.defaults_applied == [
        f"budget.token_cap={LOCAL_TOKEN_CAP} (local model)",
        f"budget.force_submit_at={LOCAL_FORCE_SUBMIT_AT} (local model)",
        "budget.max_output_tokens=256 (local model)",
        "models.0.max_connections=1 (local model)",
    ]
    # run.json holds the effective values; reading them back changes nothing.
    again = RunConfig.model_validate(config.model_dump(mode="json"))
    assert again.model_dump() == config.model_dump() and again.defaults_applied == []


def test_a_one_shot_track_gets_room_for_a_written_answer(tasks: Path) -> None:
    config = RunConfig(track="phybench", tasks=tasks, models=[ModelConfig(name=LOCAL)])
    assert budget_of(config) == (LOCAL_TOKEN_CAP, LOCAL_FORCE_SUBMIT_AT, LOCAL_MAX_OUTPUT_TOKENS_OTHER)


def test_stated_values_are_kept(tasks: Path) -> None:
    flags = RunFlags(tasks=tasks, models=[LOCAL], token_cap=3_000, force_submit_at=2_000)
    assert budget_of(load_run_config(None, flags)) == (3_000, 2_000, 256)
    stated = RunConfig(
        tasks=tasks,
        models=[ModelConfig(name=LOCAL, max_connections=2)],
        budget={"max_output_tokens": 64, "token_cap": 7_000, "force_submit_at": 6_000},
    )
    assert budget_of(stated) == (7_000, 6_000, 64) and stated.models[0].max_connections == 2
    assert stated.defaults_applied == []


def test_other_models_keep_the_protocols_limits(tasks: Path) -> None:
    for models in (
        [ModelConfig(name=LOCAL), ModelConfig(name="openai/gpt-x")],
        [ModelConfig(name="openai/gpt-x")],
        # A local/ name at the user's own URL is not the embedded 8k-context model.
        [ModelConfig(name=LOCAL, base_url="http://127.0.0.1:9/v1")],
    ):
        config = RunConfig(tasks=tasks, models=models)
        assert budget_of(config) == (1_000_000, 660_000, None)
        assert all(m.max_connections == 8 for m in config.models) and config.defaults_applied == []
