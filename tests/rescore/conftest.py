"""A small finished research run to re-score: scripted model, scripted judge, both on loopback.

The model quotes its problem's marker (``MARK-8``); judge A awards the points the marker names
(or no verdict for ``MARK-bad``). Re-scoring tests then grade the same answers with judges that
answer differently, and count the requests every server receives.
"""

from __future__ import annotations

import asyncio
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from proctor.agent.inputs.config import ModelConfig, RunConfig
from proctor.agent.rescore.engine import Rescorer, RescoreResult
from proctor.agent.rescore.settings import RescoreFlags, rescore_config
from proctor.agent.rescore.stored_run import load_stored_run
from proctor.agent.run.progress import RunProgress
from proctor.agent.run.runner import execute_run
from tests.support.scripted_server import Reply, ScriptedServer, Step

MARKER = re.compile(r"MARK-(\w+)")


def model_script(request: dict[str, Any], index: int) -> Step:
    problem = request["messages"][-1]["content"]
    return Reply(content=f"My answer, {MARKER.search(problem).group(0)}.")  # type: ignore[union-attr]


def marker_judge(request: dict[str, Any], index: int) -> Step:
    marker = MARKER.findall(request["messages"][-1]["content"])[-1]
    if marker == "bad":
        return Reply(content="I cannot decide.")
    return Reply(content=f"Partly right.\nVERDICT: {marker}")


def fixed_points_judge(points: int, delay_s: float = 0.0) -> Any:
    def script(request: dict[str, Any], index: int) -> Step:
        return Reply(content=f"Judged again.\nVERDICT: {points}", delay_s=delay_s)

    return script


def quiet_progress() -> RunProgress:
    return RunProgress(Console(file=io.StringIO(), width=120), live=False)


def write_research_tasks(path: Path, marks: tuple[str, ...] = ("8", "6", "bad")) -> Path:
    rows = [
        {
            "id": f"r{i}",
            "question": f"Explain X. MARK-{mark}",
            "rubric": "Up to 10 points.",
            "subject": "physics",
        }
        for i, mark in enumerate(marks, start=1)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@dataclass
class StoredResearchRun:
    directory: Path
    tasks: Path
    model_server: ScriptedServer
    judge_server: ScriptedServer


@pytest.fixture
def research_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[StoredResearchRun]:
    """A finished research run (3 tasks x 2 trials); both servers stay up for the test to count."""
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    tasks = write_research_tasks(tmp_path / "tasks.jsonl")
    with ScriptedServer(model_script) as model_server, ScriptedServer(marker_judge) as judge_server:
        config = RunConfig(
            track="research",
            tasks=tasks,
            out=tmp_path / "run",
            models=[ModelConfig(name="openai/student", base_url=model_server.base_url, max_retries=0)],
            judge=ModelConfig(name="openai/judge-a", max_retries=0),
            trials=2,
        )
        # The judge's endpoint comes from the environment, as most users set it.
        monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url)
        result = asyncio.run(execute_run(config, progress=quiet_progress(), handle_signals=False))
        monkeypatch.delenv("OPENAI_BASE_URL")
        assert result.status == "finished"
        yield StoredResearchRun(tmp_path / "run", tasks, model_server, judge_server)


async def rescore(
    run: Path, out: Path, *, resume: bool = False, config_file: Path | None = None, **flags: Any
) -> RescoreResult:
    stored = load_stored_run(run)
    config = rescore_config(stored, config_file, RescoreFlags(**flags))
    rescorer = Rescorer(stored, config, out, resume=resume, progress=quiet_progress(), handle_signals=False)
    return await rescorer.run()


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
