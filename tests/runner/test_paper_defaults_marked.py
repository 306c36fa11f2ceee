"""Judged tracks never apply the paper's defaults silently (issue 23, item 5).

Invariant: every value a run takes from the FrontierScience paper because its config left it
unset is marked as the paper's wherever the run is described (``--dry-run``, the run's first
line, run.json ``paper_defaults``, the report header), and a value the config states is never
marked. When the judge itself is the paper's default and the key check or the preflight fails
on it, the one-line error says so and names ``--judge``.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from proctor.agent.cli import commands_registry  # noqa: F401  (imports run_plan without a cycle)
from proctor.agent.errors import UserError
from proctor.agent.inputs.config import ModelConfig, RunConfig
from proctor.agent.report.page import _paper_defaults_text
from proctor.agent.run.dry_run import build_plan, render_plan
from proctor.agent.run.preflight import check_keys, preflight, uses_of
from proctor.agent.run.progress import RunProgress
from proctor.agent.run.runner import execute_run
from tests.support.scripted_server import HttpError, Reply, ScriptedServer

REPO = Path(__file__).resolve().parents[2]
OLYMPIAD_TASKS = REPO / "configs" / "data" / "frontierscience" / "olympiad" / "test.jsonl"


def _config(**fields: Any) -> RunConfig:
    return RunConfig.model_validate(
        {
            "track": "olympiad",
            "tasks": str(OLYMPIAD_TASKS),
            "models": [{"name": "openai/student", "base_url": "http://127.0.0.1:9/v1"}],
            "out": "/nonexistent/planned",
            **fields,
        }
    )


def test_dry_run_marks_every_paper_value_and_nothing_else() -> None:
    text = render_plan(build_plan(_config(limit_tasks=1)))
    lines = {line.split()[0]: line for line in text.splitlines()[1:]}
    assert lines["trials"].endswith("20 (paper default)")
    assert "openai/student (effort high (paper default)," in lines["model"]
    assert "openai/gpt-5 (paper default) (effort high (paper default)," in lines["judge"]
    assert (
        "paper defaults  trials=20, models.0.reasoning_effort=high, judge.name=openai/gpt-5, "
        "judge.reasoning_effort=high: from the FrontierScience paper" in text
    )
    assert "--judge" in lines["paper"]
    # The same values, stated: nothing is marked and no row lists them.
    stated = _config(
        limit_tasks=1,
        trials=20,
        models=[{"name": "openai/student", "base_url": "http://127.0.0.1:9/v1", "reasoning_effort": "high"}],
        judge={"name": "openai/gpt-5", "reasoning_effort": "high"},
    )
    stated_text = render_plan(build_plan(stated))
    assert "paper default" not in stated_text and stated.paper_defaults == {}


def test_only_the_judges_effort_is_marked_when_the_judge_is_named() -> None:
    made = _config(trials=1, judge={"name": "openai/grader"}, limit_tasks=1)
    assert made.paper_defaults == {"models.0.reasoning_effort": "high", "judge.reasoning_effort": "high"}
    judge_line = next(line for line in render_plan(build_plan(made)).splitlines() if "judge  " in line)
    assert "openai/grader (effort high (paper default)," in judge_line
    assert "openai/grader (paper default)" not in judge_line


def test_an_unset_key_for_the_paper_judge_says_it_is_the_papers_and_names_dash_dash_judge(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    made = _config(trials=1)
    with pytest.raises(UserError) as caught:
        check_keys(uses_of(made, ["openai/student"]))
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("judge 'openai/gpt-5': the key variable OPENAI_API_KEY is not set")
    assert "default of the FrontierScience paper" in message and "--judge NAME" in message
    # A judge the run names gets the plain error.
    named = _config(trials=1, judge={"name": "openai/gpt-5"})
    with pytest.raises(UserError) as plain:
        check_keys(uses_of(named, ["openai/student"]))
    assert "paper" not in str(plain.value) and "--judge" not in str(plain.value)


async def test_a_preflight_failure_on_the_paper_judge_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    with (
        ScriptedServer(lambda request, index: Reply(content="OK")) as model_server,
        ScriptedServer(lambda request, index: HttpError(404, "The model `gpt-5` does not exist")) as judge,
    ):
        # The paper's judge talks to OPENAI_BASE_URL: here a local server that has no such model.
        monkeypatch.setenv("OPENAI_BASE_URL", judge.base_url)
        made = _config(trials=1, models=[{"name": "openai/student", "base_url": model_server.base_url}])
        with pytest.raises(UserError) as caught:
            await preflight(uses_of(made, ["openai/student"]))
        message = str(caught.value)
        assert message.startswith(f"preflight: judge openai/gpt-5 at {judge.base_url}:")
        assert "does not exist" in message and "\n" not in message
        assert "default of the FrontierScience paper" in message and "--judge NAME" in message
        # The same judge named by the run: the plain error.
        named = made.model_copy(update={"judge": ModelConfig(name="openai/gpt-5")})
        named._paper_defaults = {}
        with pytest.raises(UserError) as plain:
            await preflight(uses_of(named, ["openai/student"]))
        assert "paper" not in str(plain.value)


async def test_the_runs_first_line_and_the_report_header_name_the_paper_values(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "o1", "question": "2+2?", "answer": "4"}) + "\n")
    out = io.StringIO()
    with (
        ScriptedServer(lambda request, index: Reply(content="FINAL ANSWER: 4")) as model_server,
        ScriptedServer(lambda request, index: Reply(content="VERDICT: CORRECT")) as judge_server,
    ):
        made = RunConfig(
            track="olympiad",
            tasks=tasks,
            trials=2,
            out=tmp_path / "run",
            models=[ModelConfig(name="openai/student", base_url=model_server.base_url, max_retries=0)],
            judge=ModelConfig(name="openai/grader", base_url=judge_server.base_url, max_retries=0),
        )
        progress = RunProgress(Console(file=out, width=400), live=False)
        await execute_run(made, progress=progress, handle_signals=False)
    printed = out.getvalue().splitlines()
    assert printed[0].startswith("paper defaults (not set by this run's config; FrontierScience paper")
    assert printed[0].endswith("models.0.reasoning_effort=high, judge.reasoning_effort=high")
    header = json.loads((tmp_path / "run" / "run.json").read_text())
    assert header["paper_defaults"]["values"] == {
        "models.0.reasoning_effort": "high",
        "judge.reasoning_effort": "high",
    }
    assert _paper_defaults_text(header["paper_defaults"]) == (
        "models.0.reasoning_effort=high, judge.reasoning_effort=high (not set by the config)"
    )
    # Runs recorded before the field existed, or with nothing from the paper, show nothing.
    assert _paper_defaults_text(None) == "" and _paper_defaults_text({"values": {}}) == ""
