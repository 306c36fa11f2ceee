"""Olympiad with the optional python tool: the FrontierMath tool, run in a real (local) sandbox."""

from __future__ import annotations

import dataclasses
import json

from proctor.agent.inputs.config import ModelConfig
from proctor.agent.model.factory import make_client
from proctor.agent.model.retry import RetryPolicy
from proctor.agent.results.records import Outcome
from proctor.agent.tracks.olympiad import OlympiadTrack
from proctor.agent.tracks.science_tasks import ScienceTask
from proctor.sandbox import open_sandbox
from tests.judge.support import ListClient, make_ctx
from tests.support.scripted_server import Reply, ScriptedServer, ToolCallSpec

TASK = ScienceTask(id="o-tool", question="Compute 2**10 + 2.", answer="1026", subject="physics")


async def test_python_tool_loop_then_precheck() -> None:
    script = [
        Reply(tool_calls=[ToolCallSpec("python", json.dumps({"code": "print(2**10 + 2)"}))]),
        Reply(
            tool_calls=[
                ToolCallSpec("python", '{"code": "print(1)\n'),  # malformed JSON: reported, run goes on
                ToolCallSpec("submit_answer", '{"code": "def answer(): return 1"}'),  # not an olympiad tool
            ]
        ),
        Reply(content="The sandbox printed 1026.\nFINAL ANSWER: 1026"),
    ]
    sandbox = await open_sandbox("local")
    try:
        with ScriptedServer(script) as server:
            model = make_client(
                ModelConfig(name="openai/answerer", base_url=server.base_url),
                retry_policy=RetryPolicy(max_retries=0),
            )
            judge = ListClient([])
            ctx = dataclasses.replace(make_ctx(model, judge), sandbox=sandbox)
            track = OlympiadTrack({"python_tool": True, "precheck": True})
            assert track.needs_sandbox
            record = await track.run_sample(TASK, 0, ctx)
            await model.aclose()
    finally:
        await sandbox.aclose()
    assert record.outcome is Outcome.CORRECT, record.error
    assert judge.requests == []  # settled by the pre-check on the final answer
    bodies = server.bodies("/chat/completions")
    assert len(bodies) == 3
    assert [t["function"]["name"] for t in bodies[0]["tools"]] == ["python"]
    first_result = bodies[1]["messages"][-1]
    assert first_result["role"] == "tool" and first_result["content"].strip() == "1026"
    assert [c.name for c in record.tool_calls] == ["python", "python", "submit_answer"]
    assert record.tool_calls[0].result.strip() == "1026" and record.tool_calls[0].error is None
    assert "not valid JSON" in (record.tool_calls[1].error or "")
    assert "unknown tool 'submit_answer'" in (record.tool_calls[2].error or "")
    assert len(record.turns) == 3 and record.turns[-1].cumulative_tokens == 45


async def test_python_tool_turn_limit_forces_a_plain_answer() -> None:
    call = Reply(tool_calls=[ToolCallSpec("python", json.dumps({"code": "print(0)"}))])
    script = [call, Reply(content="FINAL ANSWER: 1026")]
    sandbox = await open_sandbox("local")
    try:
        with ScriptedServer(script) as server:
            model = make_client(ModelConfig(name="openai/m", base_url=server.base_url))
            ctx = dataclasses.replace(make_ctx(model, ListClient([])), sandbox=sandbox)
            record = await OlympiadTrack(
                {"python_tool": True, "max_tool_turns": 2, "precheck": True}
            ).run_sample(TASK, 0, ctx)
            await model.aclose()
    finally:
        await sandbox.aclose()
    bodies = server.bodies("/chat/completions")
    assert "tool_choice" not in bodies[0] and bodies[1]["tool_choice"] == "none"
    assert record.outcome is Outcome.CORRECT
