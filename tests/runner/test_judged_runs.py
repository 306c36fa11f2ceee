"""A judged track through the shared runner: points, success at >= 7 and judge errors in the summary.

Model and judge are both scripted, on separate servers (a judge may sit at its own endpoint).
The model quotes the marker from its problem; the judge awards the points that marker names,
or replies without a verdict line, which the track must record as a judge error.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from proctor.agent.inputs.config import ModelConfig, RunConfig
from proctor.agent.run.runner import execute_run
from tests.runner.conftest import quiet_progress, read_lines
from tests.support.scripted_server import Reply, ScriptedServer, Step

MARKER = re.compile(r"MARK-(\w+)")


def model_script(request: dict[str, Any], index: int) -> Step:
    problem = request["messages"][-1]["content"]
    return Reply(content=f"My answer, {MARKER.search(problem).group(0)}.")  # type: ignore[union-attr]


def judge_script(request: dict[str, Any], index: int) -> Step:
    prompt = request["messages"][-1]["content"]
    # The judge prompt quotes the problem and the model's answer; take the answer's marker.
    marker = MARKER.findall(prompt)[-1]
    if marker == "bad":
        return Reply(content="I cannot decide.")
    return Reply(content=f"The answer meets the rubric partly.\nVERDICT: {marker}")


def write_research_tasks(path: Path) -> Path:
    rows = [("r1", "8"), ("r2", "6"), ("r3", "bad")]
    path.write_text(
        "\n".join(
            json.dumps(
                {
                    "id": task_id,
                    "question": f"Explain X. MARK-{mark}",
                    "rubric": "Up to 10 points.",
                    "subject": "physics",
                }
            )
            for task_id, mark in rows
        )
        + "\n"
    )
    return path


async def test_research_run_reports_points_success_rate_and_judge_errors_apart(tmp_path: Path):
    tasks = write_research_tasks(tmp_path / "tasks.jsonl")
    with ScriptedServer(model_script) as model_server, ScriptedServer(judge_script) as judge_server:
        config = RunConfig(
            track="research",
            tasks=tasks,
            out=tmp_path / "run",
            models=[ModelConfig(name="openai/student", base_url=model_server.base_url, max_retries=0)],
            judge=ModelConfig(name="openai/judge", base_url=judge_server.base_url, max_retries=0),
            trials=2,
        )
        result = await execute_run(config, progress=quiet_progress(), handle_signals=False)
    assert result.status == "finished"
    outcomes = {
        (r["task_id"], r["trial"]): r["outcome"] for r in read_lines(tmp_path / "run" / "samples.jsonl")
    }
    assert outcomes == {
        ("r1", 0): "correct",
        ("r1", 1): "correct",
        ("r2", 0): "incorrect",
        ("r2", 1): "incorrect",
        ("r3", 0): "judge_error",
        ("r3", 1): "judge_error",
    }
    overall = result.summary["overall"]
    assert overall["errors"]["judge_error"] == 2
    # Scored tasks r1 (8 points, success) and r2 (6 points, failure).
    assert overall["points"]["mean"] == 7.0 and overall["points"]["n_tasks"] == 2
    assert overall["accuracy"]["mean"] == 0.5
    # Counting the judge errors as failures: r3 joins at 0 -> (1 + 0 + 0) / 3.
    assert abs(overall["accuracy_errors_as_failures"]["mean"] - 1 / 3) < 1e-12
    header = json.loads((tmp_path / "run" / "run.json").read_text())
    assert header["sandbox"] is None and header["config"]["judge"]["name"] == "openai/judge"
