"""Fixtures for runner tests: a scripted model server that echoes, and task files."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from proctor.agent.inputs.config import ModelConfig, RunConfig
from proctor.agent.run.progress import RunProgress
from tests.runner.echo_track import register
from tests.support.scripted_server import Reply, ReportedUsage, ScriptedServer, Step

register()

_SAY = re.compile(r"say:(?P<answer>\S+)(?: delay:(?P<delay>[\d.]+))?")


def echo_script(request: dict[str, Any], index: int) -> Step:
    """Answer 'say:X [delay:S]' with X after S seconds; usage grows with the question length."""
    question = request["messages"][-1]["content"]
    match = _SAY.search(question)
    answer = match.group("answer") if match else "?"
    delay = float(match.group("delay") or 0) if match else 0.0
    return Reply(
        content=answer, usage=ReportedUsage(prompt_tokens=len(question), completion_tokens=3), delay_s=delay
    )


@pytest.fixture
def echo_server() -> Iterator[ScriptedServer]:
    with ScriptedServer(echo_script) as server:
        yield server


def write_tasks(
    path: Path,
    count: int,
    *,
    wrong: set[int] = frozenset(),
    delay: float = 0.0,
    subjects: tuple[str, ...] = ("algebra", "geometry"),
) -> Path:
    """Tasks t00..; task i is answered wrongly when i is in ``wrong``."""
    lines = []
    for i in range(count):
        said = "wrong" if i in wrong else f"a{i}"
        question = f"say:{said}" + (f" delay:{delay}" if delay else "")
        lines.append(
            json.dumps(
                {
                    "id": f"t{i:02d}",
                    "question": question,
                    "answer": f"a{i}",
                    "subject": subjects[i % len(subjects)],
                    "metadata": {"quickstart": i < 2},
                }
            )
        )
    path.write_text("\n".join(lines) + "\n")
    return path


def make_config(tasks: Path, out: Path, base_url: str, **changes: Any) -> RunConfig:
    models = changes.pop("models", None) or [
        ModelConfig(name="openai/echo-model", base_url=base_url, max_retries=0)
    ]
    return RunConfig(track=changes.pop("track", "echo"), tasks=tasks, out=out, models=models, **changes)


def quiet_progress() -> RunProgress:
    return RunProgress(Console(file=io.StringIO(), width=120), live=False)


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]
