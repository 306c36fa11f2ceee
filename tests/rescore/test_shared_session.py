"""`proctor run` and `proctor rescore` share one session lifecycle (agent/run/session.py).

Invariant: whichever command a Ctrl-C interrupts, every sample finished before it is kept, the
ones in flight are not written, and run.json and summary.json end the session with the same
fields (status, end time, samples written now, harness errors, the stop reason). The oracle is
the first command's own files: the interrupted rescore must close exactly as the interrupted run
does. Both are interrupted through the handler SIGINT triggers, in process, after two samples.
"""

from __future__ import annotations

import asyncio
import io
import json
import signal
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from proctor.agent.inputs.config import ModelConfig, RunConfig
from proctor.agent.rescore.engine import Rescorer
from proctor.agent.rescore.settings import RescoreFlags, rescore_config
from proctor.agent.rescore.stored_run import load_stored_run
from proctor.agent.results.records import SampleRecord
from proctor.agent.run.progress import RunProgress
from proctor.agent.run.runner import Runner, RunOptions
from proctor.agent.run.session import SampleSession
from tests.rescore.conftest import (
    StoredResearchRun,
    marker_judge,
    model_script,
    read_lines,
    write_research_tasks,
)
from tests.support.scripted_server import Reply, ScriptedServer, Step

# What the shared lifecycle writes when it closes a session, whichever command ran it.
SESSION_CLOSE_FIELDS = {"started_at", "ended_at", "status", "ran", "harness_errors", "planned_samples"}
HEADER_CLOSE_FIELDS = {"status", "ended_at", "stopped", "samples_planned"}


class InterruptAfter(RunProgress):
    """A quiet display that presses Ctrl-C (the session's SIGINT handler) once ``count`` samples
    are on disk; every sample after those is stalled by its server, so none can finish first."""

    def __init__(self, count: int) -> None:
        super().__init__(Console(file=io.StringIO(), width=120), live=False)
        self.count = count
        self.seen = 0
        self.session: SampleSession[Any] | None = None

    def sample_finished(self, record: SampleRecord) -> None:
        super().sample_finished(record)
        self.seen += 1
        if self.seen == self.count and self.session is not None:
            asyncio.get_running_loop().call_soon(self.session._interrupt, int(signal.SIGINT))


def stall_after(fast: int, script: Any) -> Any:
    """``script``'s replies, but every request after the first ``fast`` waits until the server stops."""

    def stalled(request: dict[str, Any], index: int) -> Step:
        reply = script(request, index)
        return reply if index < fast else Reply(content=reply.content, delay_s=60.0)

    return stalled


def closing_fields(directory: Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    header = json.loads((directory / "run.json").read_text())
    summary = json.loads((directory / "summary.json").read_text())
    return header, header["sessions"][-1], summary


def assert_interrupted_after_two(directory: Path, result_status: str) -> dict[str, Any]:
    header, session, summary = closing_fields(directory)
    assert result_status == "interrupted"
    assert header.keys() >= HEADER_CLOSE_FIELDS and header["status"] == "interrupted" and header["ended_at"]
    assert header["stopped"] is None
    assert session.keys() >= SESSION_CLOSE_FIELDS
    assert session["status"] == "interrupted" and session["ran"] == 2 and session["harness_errors"] == []
    assert "error" not in session  # an interrupt is not a failure
    assert len(read_lines(directory / "samples.jsonl")) == 2
    assert summary["status"] == "interrupted"
    assert summary["finished_samples"] == 2 and summary["planned_samples"] == 6
    return session


def test_run_and_rescore_are_one_lifecycle() -> None:
    """Neither command restates the lifecycle: both only fill in what the session asks."""
    for command in (Runner, Rescorer):
        assert issubclass(command, SampleSession)
        restated = {"run_session", "_run_pending", "_interrupt", "_stopping"} & vars(command).keys()
        assert restated == set(), f"{command.__name__} restates {restated}"


def test_an_interrupted_rescore_keeps_finished_samples_and_closes_as_a_run_does(
    research_run: StoredResearchRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The run: a fresh research run whose model stalls after two replies.
    tasks = write_research_tasks(tmp_path / "tasks2.jsonl")
    run_dir = tmp_path / "interrupted-run"
    with (
        ScriptedServer(stall_after(2, model_script)) as model,
        ScriptedServer(marker_judge) as judge,
    ):
        config = RunConfig(
            track="research",
            tasks=tasks,
            out=run_dir,
            models=[ModelConfig(name="openai/student", base_url=model.base_url, max_retries=0)],
            judge=ModelConfig(name="openai/judge-a", base_url=judge.base_url, max_retries=0),
            trials=2,
            max_concurrency=2,
        )
        progress = InterruptAfter(2)
        runner = Runner(config, RunOptions(progress=progress, handle_signals=False))
        progress.session = runner
        run_result = asyncio.run(runner.run())
    run_session = assert_interrupted_after_two(run_dir, run_result.status)

    # The rescore of a finished run: its judge stalls after two verdicts.
    out = tmp_path / "interrupted-rescore"
    with ScriptedServer(stall_after(2, marker_judge)) as slow_judge:
        stored = load_stored_run(research_run.directory)
        rescore = rescore_config(
            stored,
            None,
            RescoreFlags(judge="openai/j2", judge_base_url=slow_judge.base_url, max_concurrency=2),
        )
        progress = InterruptAfter(2)
        rescorer = Rescorer(stored, rescore, out, resume=False, progress=progress, handle_signals=False)
        progress.session = rescorer
        rescore_result = asyncio.run(rescorer.run())
    rescore_session = assert_interrupted_after_two(out, rescore_result.status)
    assert rescore_result.finished == 2 and rescore_result.rescored_now == 2

    # The same closing fields; only each command's own additions differ.
    run_only = {"selection"}
    rescore_only = {"rescored", "sandbox_spec"}
    assert run_session.keys() - run_only == rescore_session.keys() - rescore_only
    kept = read_lines(out / "samples.jsonl")
    assert all(record["rescore"]["rescored"] for record in kept)
