"""The refusal rows for the providers people benchmark, in a whole run (docs/models.md, "Provider
refusals"): Gemini, xAI, Anthropic and DeepSeek fronts, a 413 and a 422 stating the context
size. Each is scored once as a failure, counted in accuracy, and ``--resume`` does not run it
again; an unrecognised 400 stays a model error, grouped by status and message in the summary,
and is the only sample ``--resume`` runs again.

In process: the runner, the FrontierMath track on the local sandbox, the real openai SDK
against a scripted server on 127.0.0.1.
"""

from __future__ import annotations

import io
import json
import re
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
from tests.support.scripted_server import HttpError, Reply, ReportedUsage, ScriptedServer, Step, ToolCallSpec

# Each front's refusal of a conversation that outgrew the model (the documented texts).
REFUSALS: dict[str, HttpError] = {
    "gemini": HttpError(
        400,
        body=[
            {
                "error": {
                    "code": 400,
                    "message": "The input token count (1200293) exceeds the maximum number of tokens allowed "
                    "(1048576).",
                    "status": "INVALID_ARGUMENT",
                }
            }
        ],
    ),
    "xai": HttpError(
        400,
        body={
            "code": "Client specified an invalid argument",
            "error": "This model's maximum prompt length is 131072 but the request contains 136973 tokens.",
        },
    ),
    "anthropic": HttpError(
        400,
        body={
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "input length and `max_tokens` exceed context limit: 201000 + 8192 > 200000, "
                "decrease input length or `max_tokens` and try again",
            },
        },
    ),
    "deepseek": HttpError(
        400,
        body={
            "error": {
                "message": "This model's maximum context length is 65536 tokens. However, you "
                "requested 87731 tokens (87731 in the messages, 0 in the completion). Please reduce "
                "the length of the messages or completion.",
                "type": "invalid_request_error",
                "param": None,
                "code": "invalid_request_error",
            }
        },
    ),
    "too-large": HttpError(413, body="<html><title>413 Request Entity Too Large</title></html>"),
    "tgi": HttpError(
        422,
        body={
            "error": "Input validation error: `inputs` must have less than 4096 tokens. Given: 5000",
            "error_type": "validation",
        },
    ),
}
UNKNOWN = HttpError(
    400, body={"error": {"message": "Unrecognized request argument supplied: top_k", "code": None}}
)
MARKS = [*REFUSALS, "unknown", "none"]


def refusing_fronts(request: dict[str, Any], index: int) -> Step:
    """Turn 1: a python call. Turn 2: the front's refusal, by the question's marker, or a submission."""
    messages = request["messages"]
    mark = re.search(r"MARK ([\w-]+)", messages[0]["content"])
    usage = ReportedUsage(prompt_tokens=1_000, completion_tokens=50)
    if not any(m["role"] == "assistant" for m in messages):
        return Reply(tool_calls=[ToolCallSpec("python", json.dumps({"code": "print(6*7)"}))], usage=usage)
    name = mark.group(1) if mark else "none"
    if name in REFUSALS:
        return REFUSALS[name]
    if name == "unknown":
        return UNKNOWN
    return Reply(
        tool_calls=[ToolCallSpec("submit_answer", json.dumps({"code": "def answer():\n    return 42\n"}))]
    )


def write_tasks(path: Path) -> Path:
    lines = [
        json.dumps(
            {
                "id": f"fm-{mark}",
                "question": f"What is six times seven? (scripted: MARK {mark})",
                "answer_type": "Python int",
                "answer": "42",
            }
        )
        for mark in MARKS
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def requests_per_mark(bodies: list[dict[str, Any]]) -> dict[str, int]:
    counts = dict.fromkeys(MARKS, 0)
    for body in bodies:
        found = re.search(r"MARK ([\w-]+)", body["messages"][0]["content"])
        if found:
            counts[found.group(1)] += 1
    return counts


@pytest.mark.slow
async def test_each_new_refusal_is_a_scored_failure_once_and_resume_leaves_it(tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl")
    out = tmp_path / "run"
    with ScriptedServer(refusing_fronts) as server:

        def config(resume: bool) -> Any:
            models = [ModelConfig(name="openai/fronts", base_url=server.base_url, max_retries=0)]
            return make_config(
                tasks,
                out,
                server.base_url,
                models=models,
                track="frontiermath",
                sandbox=SandboxConfig(backend="local"),
                resume=resume,
            )

        first = await execute_run(config(False), progress=quiet_progress(), handle_signals=False)
        after_first = requests_per_mark([r.json for r in server.requests])
        # Two requests a sample (the python turn, then the refusal): none was retried.
        assert after_first == dict.fromkeys(MARKS, 2)

        overall = first.summary["overall"]
        refused = len(REFUSALS)
        assert overall["outcomes"] == {"correct": 1, "provider_refusal": refused, "model_error": 1}
        assert overall["scored_samples"] == refused + 1
        assert overall["accuracy"]["mean"] == pytest.approx(1 / (refused + 1))
        assert overall["model_errors"] == [
            {"status": 400, "message": "Unrecognized request argument supplied: top_k", "samples": 1}
        ]
        records = {r["task_id"]: r for r in read_lines(out / "samples.jsonl")}
        for mark in REFUSALS:
            record = records[f"fm-{mark}"]
            assert record["outcome"] == "provider_refusal" and record["score"] == 0.0
            assert record["provider_refusal"]["kind"] == "context_overflow"

        console = Console(file=io.StringIO(), width=400)
        print_final(console, first.summary, str(out))
        printed = console.file.getvalue()  # type: ignore[attr-defined]
        assert "model_error x1 (HTTP 400): Unrecognized request argument supplied: top_k" in printed
        assert f"{refused} refused by the provider, counted as failures" in printed

        await execute_run(config(True), progress=quiet_progress(), handle_signals=False)
        after_resume = requests_per_mark([r.json for r in server.requests])
    # Only the model error ran again; every refusal was kept as scored.
    assert {mark: after_resume[mark] - after_first[mark] for mark in MARKS} == {
        **dict.fromkeys(MARKS, 0),
        "unknown": 2,
    }
    page = render_report(load_run(out))
    assert 'data-model-errors="1"' in page and "Unrecognized request argument supplied: top_k" in page
