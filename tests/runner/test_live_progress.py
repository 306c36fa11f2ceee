"""A long sample shows its turns and tokens while it runs (issue 15: 400 s without output).

A real run (runner, FrontierMath loop, real SDK against the scripted server; a sandbox double,
as the sandbox is not what is tested) is looked at from inside the model's reply: while turn 3
waits, the display must already show turn 3 and the tokens of turns 1-2.
"""

from __future__ import annotations

import io
import itertools
import json
from pathlib import Path
from typing import Any

from rich.console import Console

from proctor.agent.bench.loop import open_double
from proctor.agent.inputs.config import BudgetConfig, ModelConfig, RunConfig, SandboxConfig
from proctor.agent.results.records import Outcome, SampleRecord
from proctor.agent.run.progress import PLAIN_PROGRESS_INTERVAL_S, RunProgress
from proctor.agent.run.runner import execute_run
from tests.support.scripted_server import Reply, ReportedUsage, ScriptedServer, Step, ToolCallSpec


def render(progress: RunProgress) -> str:
    console = Console(file=io.StringIO(), width=160, color_system=None)
    console.print(progress)
    return console.file.getvalue()  # type: ignore[attr-defined]


def fm_config(tmp_path: Path, base_url: str, task_id: str = "long-1") -> RunConfig:
    tasks = tmp_path / "tasks.jsonl"
    question = {"id": task_id, "question": "Six times seven?", "answer_type": "Python int", "answer": "42"}
    tasks.write_text(json.dumps(question) + "\n")
    return RunConfig(
        track="frontiermath",
        tasks=tasks,
        out=tmp_path / "run",
        models=[ModelConfig(name="openai/scripted", base_url=base_url, max_retries=0)],
        budget=BudgetConfig(token_cap=10_000, force_submit_at=9_000),
        sandbox=SandboxConfig(backend="local", calibrate=False),
    )


async def test_a_long_sample_shows_its_turn_and_tokens_while_it_runs(tmp_path: Path) -> None:
    ticks = itertools.count()
    # Every reading of the clock is 31 s later: each turn's end is due a plain progress line.
    progress = RunProgress(
        Console(file=io.StringIO(), width=200), live=False, clock=lambda: next(ticks) * 31.0
    )
    seen_while_waiting: list[str] = []

    def script(request: dict[str, Any], index: int) -> Step:
        # Runs in the server's thread while the sample waits for this reply.
        seen_while_waiting.append(render(progress))
        if index < 3:
            code = json.dumps({"code": f"print({index})"})
            return Reply(
                tool_calls=[ToolCallSpec("python", code)], usage=ReportedUsage(1_000 * (index + 1), 100)
            )
        return Reply(content="still thinking", usage=ReportedUsage(9_950, 100))  # past the cap

    with ScriptedServer(script) as server:
        config = fm_config(tmp_path, server.base_url)
        result = await execute_run(
            config, progress=progress, handle_signals=False, sandbox_opener=open_double
        )
    assert result.status == "finished"
    record = SampleRecord.model_validate_json(
        (tmp_path / "run" / "samples.jsonl").read_text().splitlines()[0]
    )
    assert record.outcome is Outcome.NO_SUBMISSION and record.cap_reached and len(record.turns) == 4
    # Turn 3's request: two turns answered (1,100 + 2,100 tokens), waiting on the third.
    third = seen_while_waiting[2]
    assert "openai/scripted long-1#0" in third and "turn 3" in third
    assert "tokens 3,200" in third and "waiting for the model" in third
    assert "turn 1" in seen_while_waiting[0] and "tokens 0" in seen_while_waiting[0]
    # Plain output (CI, pipes): a line per turn here, as each came 30 s or more after the last.
    lines = progress.console.file.getvalue().splitlines()  # type: ignore[attr-defined]
    turn_lines = [line.strip() for line in lines if "long-1#0: turn" in line]
    assert [line.split(": ", 1)[1].split(", ")[:2] for line in turn_lines] == [
        ["turn 1", "1,100 tokens"],
        ["turn 2", "3,200 tokens"],
        ["turn 3", "6,300 tokens"],
        ["turn 4", "16,350 tokens"],
    ]
    # Finished samples leave the display.
    assert progress.active == {} and "turn" not in render(progress).split("retries")[-1]


def test_plain_progress_lines_are_throttled_and_hostile_names_shown_not_obeyed() -> None:
    now = [0.0]
    out = io.StringIO()
    progress = RunProgress(Console(file=out, width=300), live=False, clock=lambda: now[0])
    events = progress.for_sample("openai/m\x1b[2J", "t[/]\x07", 0)
    for turn in range(1, 7):
        events.model_call_started(turn)
        now[0] += PLAIN_PROGRESS_INTERVAL_S / 2
        events.turn_finished(turn, turn * 100)
    text = out.getvalue()
    assert text.count(": turn") == 3  # one line per 30 s, not one per turn
    assert "\x1b" not in text and "\x07" not in text and "t[/]\\x07#0" in text
    # The live panel, with rich markup in the name, renders as text.
    events.model_call_started(7)
    now[0] += 12
    panel = render(progress)
    assert "t[/]\\x07#0" in panel and "turn 7" in panel and "waiting for the model 12s" in panel


def test_the_live_panel_lists_a_bounded_number_of_samples() -> None:
    progress = RunProgress(Console(file=io.StringIO()), live=False, clock=lambda: 0.0)
    for index in range(20):
        progress.for_sample("openai/m", f"task-{index}", 0).turn_finished(1, 10)
    panel = render(progress)
    assert "task-0#0" in panel and "task-19#0" not in panel and "and 12 more running" in panel
