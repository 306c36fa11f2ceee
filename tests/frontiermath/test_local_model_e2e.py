"""End to end with the real embedded model: Gemma 3 270M under llama.cpp on one quickstart task."""

from __future__ import annotations

from pathlib import Path

import pytest

from proctor.agent.inputs.config import ModelConfig
from proctor.agent.model.factory import make_client
from proctor.agent.results.records import Outcome
from proctor.agent.tracks.frontiermath.track import FrontierMathTrack
from proctor.sandbox import open_sandbox
from tests.frontiermath.support import context, run_config

SAMPLES = Path(__file__).resolve().parents[2] / "configs" / "tasks" / "frontiermath-samples.jsonl"


@pytest.mark.local_model
@pytest.mark.timeout(900)
async def test_real_local_model_runs_one_quickstart_task() -> None:
    from proctor.agent.model.local_server import LocalLlamaServer

    track = FrontierMathTrack()
    task = next(t for t in track.load_tasks(SAMPLES) if t.quickstart)
    config = run_config(token_cap=4_000, force_submit_at=2_600, max_output_tokens=160)
    sandbox = await open_sandbox("local")
    try:
        async with LocalLlamaServer() as base_url:
            client = make_client(ModelConfig(name="local/gemma3-270m"), base_url_override=base_url)
            try:
                record = await track.run_sample(task, 0, context(client, sandbox, config))
            finally:
                await client.aclose()
    finally:
        await sandbox.aclose()
    # A 270M model: whatever it does, the harness must turn it into a complete, honest record.
    assert record.outcome in set(Outcome) - {Outcome.JUDGE_ERROR, Outcome.SCORER_TIMEOUT}
    assert record.outcome is not Outcome.MODEL_ERROR, record.error
    print(f"local model: {record.outcome} after {len(record.turns)} turns, {record.total_tokens} tokens")
    assert record.turns and record.total_tokens == record.turns[-1].cumulative_tokens < 4_000
    assert record.score == (1.0 if record.outcome is Outcome.CORRECT else 0.0)
    assert all(call.result for call in record.tool_calls)
    assert record.transcript[0]["content"].rstrip().endswith(task.question)
