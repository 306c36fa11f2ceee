"""A run where one model's endpoint refuses reasoning carried across turns, beside one that
takes it: the refusal is on that model's records, in run.json, on a summary line and in the
report, and the other model's requests still carry their reasoning.

In process: the runner, the FrontierMath track on the local sandbox, the real openai SDK and
the Responses client against a scripted server on 127.0.0.1.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from proctor.agent.inputs.config import ModelConfig, SandboxConfig
from proctor.agent.report.loader import load_run
from proctor.agent.report.page import render_report
from proctor.agent.run.progress import print_final
from proctor.agent.run.runner import execute_run
from tests.runner.conftest import make_config, quiet_progress, read_lines
from tests.support.scripted_server import HttpError, Reply, ScriptedServer, Step, ToolCallSpec

REFUSAL = "Encrypted content is not supported with this model."
RIGHT = "def answer():\n    return 6 * 7\n"


def two_models(request: dict[str, Any], index: int) -> Step:
    """``refuser`` refuses any request carrying reasoning; both answer a python turn, then submit."""
    inputs = request.get("input") or []
    carries = "include" in request or any(item.get("type") == "reasoning" for item in inputs)
    if request.get("model") == "refuser" and carries:
        return HttpError(400, REFUSAL, type="invalid_request_error")
    if not any(item.get("type") == "function_call_output" for item in inputs):
        return Reply(
            tool_calls=[ToolCallSpec("python", json.dumps({"code": "print(6 * 7)"}))],
            reasoning="working it out",
            encrypted_reasoning=f"enc-{index}",
        )
    return Reply(tool_calls=[ToolCallSpec("submit_answer", json.dumps({"code": RIGHT}))])


def write_tasks(path: Path, count: int) -> Path:
    lines = [
        json.dumps(
            {
                "id": f"fm-{i}",
                "question": "What is six times seven?",
                "answer_type": "Python int",
                "answer": "42",
            }
        )
        for i in range(count)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.slow
async def test_a_refused_reasoning_carry_is_shown_and_changes_no_other_model(tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", 2)
    out = tmp_path / "run"
    with ScriptedServer(two_models) as server:
        models = [
            ModelConfig(name=f"openai/{name}", base_url=server.base_url, api="responses", max_retries=0)
            for name in ("refuser", "carrier")
        ]
        config = make_config(
            tasks,
            out,
            server.base_url,
            models=models,
            track="frontiermath",
            sandbox=SandboxConfig(backend="local"),
        )
        result = await execute_run(config, progress=quiet_progress(), handle_signals=False)
        requests = [r.json for r in server.requests]

    records = read_lines(out / "samples.jsonl")
    assert {(r["model"], r["outcome"]) for r in records} == {
        ("openai/refuser", "correct"),
        ("openai/carrier", "correct"),
    }
    for record in records:
        if record["model"] == "openai/refuser":
            assert REFUSAL in (record["reasoning_not_carried"] or "")
        else:
            assert record["reasoning_not_carried"] is None

    # The other model's second turns still carried its reasoning item and asked for more.
    carrier_turns = [r for r in requests if r["model"] == "carrier"]
    second_turns = [
        r for r in carrier_turns if any(i.get("type") == "function_call_output" for i in r["input"])
    ]
    assert len(second_turns) == 2
    assert all("include" in r and any(i.get("type") == "reasoning" for i in r["input"]) for r in second_turns)

    header = json.loads((out / "run.json").read_text())
    assert list(header["reasoning_not_carried"]) == ["openai/refuser"]
    assert header["reasoning_not_carried"]["openai/refuser"]["samples"] == 2
    assert list(result.summary["overall"]["reasoning_not_carried"]) == ["openai/refuser"]

    console = Console(file=io.StringIO(), width=400)
    print_final(console, result.summary, str(out))
    printed = console.file.getvalue()  # type: ignore[attr-defined]
    line = "reasoning not carried for 2 samples of openai/refuser: the endpoint refused reasoning"
    assert line in printed and "openai/carrier:" not in printed

    page = render_report(load_run(out))
    assert (
        'data-reasoning-not-carried="1"' in page
        and "reasoning not carried for 2 samples of openai/refuser" in page
    )
