"""Provider refusals in a whole run: a real `proctor run` process, the real openai SDK, real HTTP.

One sample is solved; two get OpenAI's 400 bodies after one python turn (context_length_exceeded,
invalid_prompt). Both are the model's outcome: accuracy is 1 of 3, the refusals are recorded
with the provider's code and message, the report and terminal say so, and --resume leaves them
alone. An endpoint failure (a 503 to every request) stays an unscored error that --resume runs
again.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from proctor.agent.export.inspect_log import export_inspect
from proctor.agent.report.loader import load_run
from proctor.agent.report.page import render_report
from tests.runner.conftest import read_lines
from tests.runner.test_frontiermath_runs import proctor
from tests.support.inspect_logs import read_log
from tests.support.scripted_server import HttpError, Reply, ReportedUsage, ScriptedServer, Step, ToolCallSpec

OVERFLOW = {
    "error": {
        "message": "Your input exceeds the context window of this model.",
        "type": "invalid_request_error",
        "param": "input",
        "code": "context_length_exceeded",
    }
}
FLAGGED = {
    "error": {
        "message": "Invalid prompt: your prompt was flagged as potentially violating the usage policy.",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_prompt",
    }
}


def refusing_model(request: dict[str, Any], index: int) -> Step:
    """Turn 1: a python call. Turn 2: submit, or the provider's 400, by the question's marker."""
    messages = request["messages"]
    question = messages[0]["content"]
    usage = ReportedUsage(prompt_tokens=1_000, completion_tokens=50)
    if not any(m["role"] == "assistant" for m in messages):
        return Reply(tool_calls=[ToolCallSpec("python", json.dumps({"code": "print(6*7)"}))], usage=usage)
    if "MARK overflow" in question:
        return HttpError(400, body=OVERFLOW)
    if "MARK flagged" in question:
        return HttpError(400, body=FLAGGED)
    if "MARK outage" in question:
        return HttpError(503, "upstream unavailable")
    wanted = re.search(r"SUBMIT (\d+)", question)
    code = f"def answer():\n    return {wanted.group(1) if wanted else 0}\n"
    return Reply(tool_calls=[ToolCallSpec("submit_answer", json.dumps({"code": code}))], usage=usage)


def write_tasks(path: Path, marks: list[str]) -> Path:
    lines = [
        json.dumps(
            {
                "id": f"fm-{i}",
                "question": f"Find the number. (scripted model: MARK {mark}; SUBMIT 40)",
                "answer_type": "Python int",
                "answer": "40",
            }
        )
        for i, mark in enumerate(marks)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.slow
def test_refusals_are_scored_failures_and_resume_does_not_rerun_them(tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", ["none", "overflow", "flagged"])
    out = tmp_path / "run"
    with ScriptedServer(refusing_model) as server:
        first = proctor(["--tasks", str(tasks), "--out", str(out)], server)
        output, _ = first.communicate(timeout=300)
        assert first.returncode == 0, output
        calls = server.call_count
        # Two requests a sample: the python turn, then the submission or the refusal (not retried).
        assert calls == 6

        summary = json.loads((out / "summary.json").read_text())["overall"]
        assert summary["samples"] == 3 and summary["scored_samples"] == 3
        assert summary["accuracy"]["mean"] == pytest.approx(1 / 3)
        assert summary["outcomes"] == {"correct": 1, "provider_refusal": 2}
        assert summary["errors"]["total"] == 0
        assert "accuracy is over all 3 samples; 2 refused by the provider, counted as failures" in output

        records = {r["task_id"]: r for r in read_lines(out / "samples.jsonl")}
        overflow, flagged = records["fm-1"], records["fm-2"]
        assert overflow["outcome"] == "provider_refusal" and overflow["score"] == 0.0
        assert overflow["provider_refusal"] == {
            "kind": "context_overflow",
            "status": 400,
            "code": "context_length_exceeded",
            "message": "Your input exceeds the context window of this model.",
        }
        assert flagged["provider_refusal"]["kind"] == "refused"
        assert flagged["provider_refusal"]["code"] == "invalid_prompt"
        assert "flagged as potentially violating" in flagged["error"]
        # The python turn before the refusal is in the record, as the model's work.
        assert [c["name"] for c in overflow["tool_calls"]] == ["python"]

        resumed = proctor(["--tasks", str(tasks), "--out", str(out), "--resume"], server)
        output, _ = resumed.communicate(timeout=300)
        assert resumed.returncode == 0, output
        assert server.call_count == calls  # nothing ran again
    assert len(read_lines(out / "samples.jsonl")) == 3

    page = render_report(load_run(out))
    assert 'data-unscored="0"' in page and "2 refused by the provider, counted as failures" in page
    # Exported and read back in child processes (inspect_ai never loads into pytest's): a scored
    # sample, Inspect's own stop reason, and the refused request as the last model event.
    (log_path,) = export_inspect(out, tmp_path / "refusals.eval")
    exported = {s["id"]: s for s in read_log(log_path)["samples"]}["fm-1"]
    assert exported["scores"] is not None and exported["error"] is None
    assert exported["output"]["choices"][0]["stop_reason"] == "model_length"
    refused = [e for e in exported["events"] if e["event"] == "model"][-1]
    assert refused["error"] == (
        "context_overflow (HTTP 400): Your input exceeds the context window of this model."
    )


@pytest.mark.slow
def test_an_outage_stays_an_unscored_error_that_resume_runs_again(tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", ["none", "outage"])
    out = tmp_path / "run"
    # One retry: the outage is the point, not the backoff.
    retries = ["-M", "max_retries=1"]
    with ScriptedServer(refusing_model) as server:
        first = proctor([*retries, "--tasks", str(tasks), "--out", str(out)], server)
        output, _ = first.communicate(timeout=300)
        summary = json.loads((out / "summary.json").read_text())["overall"]
        assert summary["samples"] == 2 and summary["scored_samples"] == 1, output
        assert summary["errors"]["model_error"] == 1
        assert "accuracy is over 1 of 2 samples: 1 unscored (model_error 1)" in output
        page = render_report(load_run(out))
        assert 'data-unscored="1"' in page

        calls = server.call_count
        resumed = proctor([*retries, "--tasks", str(tasks), "--out", str(out), "--resume"], server)
        output, _ = resumed.communicate(timeout=300)
    # The outage sample ran again (and failed again); the solved one did not.
    assert server.call_count > calls
    assert all(r.json["messages"][0]["content"].count("MARK outage") for r in server.requests[calls:])
