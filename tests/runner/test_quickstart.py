"""`proctor quickstart`: the shipped config, its three tasks, and the frontier-model variant."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from proctor.agent.cli.run_cmd import QUICKSTART_CONFIG, quickstart_config
from proctor.agent.errors import UserError
from proctor.agent.results.records import Outcome
from tests.runner.conftest import read_lines
from tests.support.scripted_server import Reply, ReportedUsage, ScriptedServer, Step, ToolCallSpec

REPO = Path(__file__).resolve().parents[2]
QUICKSTART_TASKS = QUICKSTART_CONFIG.parent / "tasks" / "frontiermath-samples.jsonl"


def test_quickstart_config_selects_the_three_marked_tasks_with_small_limits(tmp_path: Path):
    config = quickstart_config(None, tmp_path / "run", None)
    assert config.track == "frontiermath" and [m.name for m in config.models] == ["local/gemma3-270m"]
    assert config.tasks == (QUICKSTART_CONFIG.parent / "tasks" / "frontiermath-samples.jsonl").resolve()
    assert config.task_filter == {"quickstart": True} and config.trials == 1
    assert (config.budget.token_cap, config.budget.force_submit_at) == (8000, 5000)
    marked = [
        json.loads(line)["id"]
        for line in config.tasks.read_text().splitlines()
        if line.strip() and json.loads(line).get("metadata", {}).get("quickstart") is True
    ]
    assert len(marked) == 3


def test_quickstart_with_a_frontier_model_uses_protocol_limits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    config = quickstart_config("openai/gpt-x", tmp_path / "run", "local")
    assert [m.name for m in config.models] == ["openai/gpt-x"]
    assert (config.budget.token_cap, config.budget.force_submit_at) == (1_000_000, 660_000)
    assert config.sandbox.backend == "local" and config.max_concurrency == 3
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(UserError, match="OPENAI_API_KEY"):
        quickstart_config("openai/gpt-x", None, None)


def _solver(request: dict[str, Any], index: int) -> Step:
    """A script cannot solve the shipped tasks: it submits 0 at once, which is graded incorrect."""
    usage = ReportedUsage(prompt_tokens=900, completion_tokens=40)
    code = "def answer():\n    return 0\n"
    return Reply(tool_calls=[ToolCallSpec("submit_answer", json.dumps({"code": code}))], usage=usage)


@pytest.mark.slow  # 8-25 s of a quick tier that must stay under 5 minutes; the full suite runs it
def test_quickstart_command_runs_the_three_tasks_and_ends_with_summary_and_path(tmp_path: Path):
    out = tmp_path / "run"
    with ScriptedServer(_solver) as server:
        env = {**os.environ, "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "test"}
        result = subprocess.run(
            ["proctor", "quickstart", "--model", "openai/scripted", "--out", str(out), "--backend", "local"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert result.returncode == 0, result.stdout + result.stderr
    records = read_lines(out / "samples.jsonl")
    assert len(records) == 3 and {r["outcome"] for r in records} == {"incorrect"}
    assert "Run summary" in result.stdout and f"run: {out}" in result.stdout
    assert f"proctor view {out}" in result.stdout


# What the embedded model's run proves is that the real pipeline works with it: the shipped
# quickstart config starts llama.cpp with the Gemma GGUF, the model's replies (tool calls with
# malformed JSON included) reach the sandbox and become complete, honest records, and the server
# stops. One task under a small token cap shows that; all three under 8,000 tokens took 333-344 s
# on 2 cores and proved nothing more. The `proctor quickstart` command itself (the same config,
# three tasks, summary and path) is covered against a scripted model above. A turn here costs
# about 900-1,000 tokens, so the third is the forced-submission turn and the cap ends the run.
SHORT_RUN = ("--limit", "1", "--token-cap", "3000", "--force-submit-at", "1500")


@pytest.mark.local_model
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_shipped_quickstart_config_runs_the_embedded_local_model_end_to_end(tmp_path: Path):
    out = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    result = subprocess.run(
        ["proctor", "run", str(QUICKSTART_CONFIG), *SHORT_RUN, "--out", str(out)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    records = read_lines(out / "samples.jsonl")
    assert len(records) == 1
    header = json.loads((out / "run.json").read_text())
    assert [model["name"] for model in header["config"]["models"]] == ["local/gemma3-270m"], header["config"]
    # A 270M model rarely solves anything; what must hold is that the pipeline ran for real and
    # turned whatever the model did into complete, honest records.
    assert not [r for r in records if r["outcome"] == "model_error"], [r["error"] for r in records]
    assert {r["outcome"] for r in records} <= set(Outcome) - {Outcome.JUDGE_ERROR, Outcome.SCORER_TIMEOUT}
    questions = {
        json.loads(line)["id"]: json.loads(line)["question"]
        for line in QUICKSTART_TASKS.read_text().splitlines()
        if line.strip() and json.loads(line).get("metadata", {}).get("quickstart") is True
    }
    for record in records:
        assert record["task_id"] in questions
        turns = record["turns"]
        assert turns and record["total_tokens"] == turns[-1]["cumulative_tokens"] <= 3_000, record["task_id"]
        assert record["score"] == (1.0 if record["outcome"] == Outcome.CORRECT else 0.0)
        assert all(call["result"] for call in record["tool_calls"]), record["tool_calls"]
        assert record["transcript"][0]["content"].rstrip().endswith(questions[record["task_id"]].strip())
    assert header["status"] == "finished"
    assert "Run summary" in result.stdout
