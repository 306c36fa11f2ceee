"""The Inspect export's transcript events, per track, read back with ``read_eval_log``.

Three real runs (scripted models on loopback, the real loops, graders and sandbox): FrontierMath
agentic (python calls in the local sandbox: one ordinary, one past its time limit, one that
exits 3; then submit_answer, verified for real), Research (judged; one task the judge cannot
decide, a ``judge_error``) and PHYBench (EED). For each sample the test checks the events'
types and order (init span with the task, a solver span with one model event per reply and
the tool events of its calls, a scorer span with the judge's requests and the score) and
their content against the record: the messages each request sent, the reply, that turn's
usage and stop reason, the model's name and settings, each call's arguments, result, duration
and sandbox outcome, the verdict and its reasons, the judge's prompt and replies. The INPUT
column is the task's question; the whole prompt is the first message.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from proctor.agent.export.inspect_log import export_inspect
from proctor.agent.inputs.config import BudgetConfig, ModelConfig, RunConfig, SandboxConfig
from proctor.agent.run.runner import execute_run
from tests.rescore.conftest import StoredResearchRun, quiet_progress, read_lines
from tests.support.inspect_logs import inspect_installed, read_log
from tests.support.scripted_server import Reply, ReportedUsage, ScriptedServer, Step, ToolCallSpec

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not inspect_installed(), reason="pip install 'proctor[inspect]'"),
]

SOLVER = ["span_begin", "span_begin"]  # solvers, then the track's solver
SCORER_OPEN = ["span_end", "span_end", "span_begin", "span_begin"]  # close solvers, open scorers
INIT = ["span_begin", "sample_init", "span_end"]


def _python(code: str) -> ToolCallSpec:
    return ToolCallSpec("python", json.dumps({"code": code}))


def _answer(value: int) -> str:
    return f"def answer():\n    return {value}\n"


# Task A computes once and submits the right answer. Task B's first call sleeps past the
# sandbox's 1 s limit, its second exits 3, then it submits a wrong answer.
PLANS = {
    "TASK-A": [_python("print(6*7)"), ToolCallSpec("submit_answer", json.dumps({"code": _answer(42)}))],
    "TASK-B": [
        _python("import time\ntime.sleep(20)"),
        _python("raise SystemExit(3)"),
        ToolCallSpec("submit_answer", json.dumps({"code": _answer(41)})),
    ],
}


def fm_model(request: dict[str, Any], index: int) -> Step:
    messages = request["messages"]
    plan = PLANS[re.search(r"TASK-[AB]", messages[0]["content"]).group(0)]  # type: ignore[union-attr]
    turn = sum(1 for m in messages if m["role"] == "assistant")
    return Reply(
        content=f"Turn {turn}.",
        tool_calls=[plan[turn]],
        usage=ReportedUsage(prompt_tokens=1000 + 100 * turn, completion_tokens=50 + turn),
    )


def by_sample(log: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["id"]: s for s in log["samples"]}


def kinds(sample: dict[str, Any]) -> list[str]:
    return [e["event"] for e in sample["events"]]


@pytest.fixture
def frontiermath_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, RunConfig]:
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    tasks = tmp_path / "tasks.jsonl"
    rows = [
        {"id": "fm-a", "question": "Find 6 times 7. (TASK-A)", "answer_type": "Python int", "answer": "42"},
        {"id": "fm-b", "question": "Find 43. (TASK-B)", "answer_type": "Python int", "answer": "43"},
    ]
    tasks.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with ScriptedServer(fm_model) as server:
        config = RunConfig(
            track="frontiermath",
            tasks=tasks,
            out=tmp_path / "run",
            models=[
                ModelConfig(
                    name="openai/scripted", base_url=server.base_url, max_retries=0, temperature=0.5, seed=7
                )
            ],
            budget=BudgetConfig(max_output_tokens=4096),
            sandbox=SandboxConfig(backend="local", timeout_s=1.0),
        )
        result = asyncio.run(execute_run(config, progress=quiet_progress(), handle_signals=False))
    assert result.status == "finished"
    return tmp_path / "run", config


def test_frontiermath_events_follow_the_conversation_call_by_call(
    frontiermath_run: tuple[Path, RunConfig], tmp_path: Path
) -> None:
    run, _config = frontiermath_run
    records = {r["task_id"]: r for r in read_lines(run / "samples.jsonl")}
    assert {k: r["outcome"] for k, r in records.items()} == {"fm-a": "correct", "fm-b": "incorrect"}
    (path,) = export_inspect(run, tmp_path / "fm.eval")
    samples = by_sample(read_log(path))
    questions = {"fm-a": "Find 6 times 7. (TASK-A)", "fm-b": "Find 43. (TASK-B)"}

    for task_id, record in records.items():
        sample = samples[task_id]
        calls = len(PLANS["TASK-A" if task_id == "fm-a" else "TASK-B"])
        assert kinds(sample) == [
            *INIT,
            *SOLVER,
            *["model", "tool"] * calls,
            *SCORER_OPEN,
            "score",
            "span_end",
            "span_end",
        ]
        # The INPUT column is the question; the whole prompt (rules, budget, tools) is message 0.
        assert sample["input"] == questions[task_id]
        first = sample["messages"][0]["text"]
        assert questions[task_id] in first and len(first) > len(questions[task_id]) + 200
        init = sample["events"][1]["sample"]
        assert init["input"] == questions[task_id] and init["id"] == task_id
        assert init["target"] == sample["target"] == ("42" if task_id == "fm-a" else "43")

        models = [e for e in sample["events"] if e["event"] == "model"]
        tools = [e for e in sample["events"] if e["event"] == "tool"]
        replies = [m for m in record["transcript"] if m["role"] == "assistant"]
        positions = [i for i, m in enumerate(record["transcript"]) if m["role"] == "assistant"]
        assert len(models) == len(replies) == calls
        for event, reply, position in zip(models, replies, positions, strict=True):
            assert event["model"] == "openai/scripted" and event.get("role") is None
            # What was sent: every message before this reply, in order.
            assert [m["role"] for m in event["input"]] == [m["role"] for m in record["transcript"][:position]]
            assert [m["content"] if isinstance(m["content"], str) else None for m in event["input"]][1:] == [
                m["content"] for m in record["transcript"][1:position]
            ]
            choice = event["output"]["choices"][0]
            assert choice["message"]["content"] == reply["content"]
            assert choice["stop_reason"] == "tool_calls"
            (call,) = choice["message"]["tool_calls"]
            assert call["function"] == reply["tool_calls"][0]["function"]["name"]
            assert event["output"]["usage"]["input_tokens"] == reply["usage"]["input_tokens"]
            assert event["output"]["usage"]["output_tokens"] == reply["usage"]["output_tokens"]
            assert event["config"]["temperature"] == 0.5 and event["config"]["seed"] == 7
            assert event["config"]["max_tokens"] == 4096 and event["config"]["max_retries"] == 0
            assert event["tool_choice"] == "auto"
            # The tools the request offered, as the loop sent them (tool_schemas of the run).
            assert [(t["name"], t["parameters"]["required"]) for t in event["tools"]] == [
                ("python", ["code"]),
                ("submit_answer", ["code"]),
            ]
            assert all(
                t["description"] and t["parameters"]["properties"]["code"]["type"] == "string"
                for t in event["tools"]
            )
            # No per-request time is recorded: no completion time, no working time.
            assert event.get("completed") is None and event.get("working_time") is None
        for event, call in zip(tools, record["tool_calls"], strict=True):
            assert event["id"] == call["call_id"] and event["function"] == call["name"]
            assert event["arguments"] == json.loads(call["raw_arguments"])
            assert event["result"] == call["result"]
            assert event["working_time"] == pytest.approx(call["duration_s"])
            assert event["metadata"]["turn"] == call["turn"]
            assert event["metadata"]["sandbox"] == call["sandbox"]
        # Each tool event follows the model event whose reply made the call.
        order = [e["event"] for e in sample["events"] if e["event"] in ("model", "tool")]
        assert order == ["model", "tool"] * calls

        (score,) = [e for e in sample["events"] if e["event"] == "score"]
        assert score["scorer"] == "proctor" and score["target"] == sample["target"]
        assert score["score"] == sample["scores"]["proctor"]
        assert score["score"]["value"] == ("C" if task_id == "fm-a" else "I")
        assert score["score"]["explanation"] == record["submission"]["verification"]
        assert score["score"]["answer"] == record["submission"]["code"]
        assert score["score"]["metadata"]["submission"]["verify_exec"] == record["submission"]["verify_exec"]

    # Task B: the sleep hit the sandbox's limit (an Inspect timeout), the exit code is kept.
    sleep, exit3, submit = [e for e in samples["fm-b"]["events"] if e["event"] == "tool"]
    assert sleep["metadata"]["sandbox"]["timed_out"] is True
    assert sleep["error"] == {"type": "timeout", "message": sleep["result"]}
    assert exit3["metadata"]["sandbox"]["exit_code"] == 3 and exit3.get("error") is None
    assert submit["function"] == "submit_answer" and submit["metadata"]["sandbox"] == {"outcome": "incorrect"}


def test_judged_events_hold_the_judges_prompt_and_reply(
    research_run: StoredResearchRun, tmp_path: Path
) -> None:
    records = read_lines(research_run.directory / "samples.jsonl")
    (path,) = export_inspect(research_run.directory, tmp_path / "research.eval")
    samples = {(s["id"], s["epoch"]): s for s in read_log(path)["samples"]}
    tasks = {json.loads(line)["id"]: json.loads(line) for line in research_run.tasks.read_text().splitlines()}
    for record in records:
        sample = samples[(record["task_id"], record["trial"] + 1)]
        judge = record["judge"]
        replies = judge["replies"]
        assert sample["input"] == tasks[record["task_id"]]["question"]
        if record["outcome"] == "judge_error":
            # No verdict: the judge's requests, then the error instead of a score.
            tail = [*["model"] * len(replies), "span_end", "span_end", "error"]
        else:
            tail = [*["model"] * len(replies), "score", "span_end", "span_end"]
        assert kinds(sample) == [*INIT, *SOLVER, "model", *SCORER_OPEN, *tail]
        answering, *graders = [e for e in sample["events"] if e["event"] == "model"]
        assert (
            answering["model"] == "openai/student"
            and answering["output"]["choices"][0]["message"]["content"] == record["transcript"][-1]["content"]
        )
        assert answering["tools"] == []  # the research track offers the model no tool
        assert len(graders) == len(replies) >= 1
        for attempt, (event, reply) in enumerate(zip(graders, replies, strict=True), start=1):
            assert event["role"] == "grader" and event["model"] == "openai/judge-a"
            assert [m["content"] for m in event["input"]] == [judge["prompt"]]
            assert event["output"]["choices"][0]["message"]["content"] == reply
            assert event["metadata"] == {"attempt": attempt}
        if len(replies) == 1:
            assert graders[0]["output"]["usage"]["input_tokens"] == judge["input_tokens"]
        if record["outcome"] == "judge_error":
            assert sample["events"][-1]["error"]["message"] == record["error"]
            continue
        score = next(e for e in sample["events"] if e["event"] == "score")
        assert score["score"]["value"] == ("C" if record["success"] else "I")
        assert score["score"]["explanation"] == replies[-1]
        assert score["score"]["metadata"]["judge"]["verdict"] == judge["verdict"]
        assert score["score"]["metadata"]["score"] == record["score"]


def test_eed_events_hold_the_score_and_its_reasons(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        "".join(
            json.dumps({"id": f"p{i}", "question": f"Find v. (P{i})", "answer": "\\sqrt{2 g L}"}) + "\n"
            for i in range(2)
        )
    )

    def reply(request: dict[str, Any], index: int) -> Step:
        right = "(P0)" in request["messages"][-1]["content"]
        return Reply(content="So \\boxed{\\sqrt{2 g L}}" if right else "So \\boxed{g L}")

    with ScriptedServer(reply) as server:
        config = RunConfig(
            track="phybench",
            tasks=tasks,
            out=tmp_path / "run",
            models=[ModelConfig(name="openai/m", base_url=server.base_url, max_retries=0)],
        )
        result = asyncio.run(execute_run(config, progress=quiet_progress(), handle_signals=False))
    assert result.status == "finished"
    records = {r["task_id"]: r for r in read_lines(tmp_path / "run" / "samples.jsonl")}
    (path,) = export_inspect(tmp_path / "run", tmp_path / "eed.eval")
    samples = by_sample(read_log(path))
    for task_id, record in records.items():
        sample = samples[task_id]
        assert kinds(sample) == [*INIT, *SOLVER, "model", *SCORER_OPEN, "score", "span_end", "span_end"]
        assert sample["input"] == f"Find v. ({task_id.upper()})"
        model = next(e for e in sample["events"] if e["event"] == "model")
        assert model["output"]["choices"][0]["message"]["content"] == record["transcript"][-1]["content"]
        # The science tracks keep each reply's usage in ``turns``, one row per reply.
        (turn,) = record["turns"]
        usage = model["output"]["usage"]
        assert (usage["input_tokens"], usage["output_tokens"]) == (
            turn["input_tokens"],
            turn["output_tokens"],
        )
        assert model["output"]["choices"][0]["stop_reason"] == "stop"
        score = next(e for e in sample["events"] if e["event"] == "score")
        assert score["score"]["metadata"]["eed"] == record["eed"]
        assert score["score"]["answer"] == record["eed"]["extracted_answer"]
        assert score["score"]["explanation"] == f"EED {record['eed']['score']:g} ({record['eed']['status']})"
        assert score["score"]["value"] == ("C" if record["success"] else "I")
    assert (
        samples["p0"]["scores"]["proctor"]["value"] == "C"
        and samples["p1"]["scores"]["proctor"]["value"] == "I"
    )
