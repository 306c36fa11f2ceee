"""Item 1: whatever a sample raises, it becomes a recorded harness_error and the run goes on.

Attacks: an exception whose __str__ raises, a huge message, a track that returns no record, a
record the store cannot write, a real `proctor run` process hitting harness bugs (exit code,
stderr, --resume), and Ctrl-C (KeyboardInterrupt must still stop the run, never be recorded).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest

from proctor.agent.records import SampleRecord
from proctor.agent.runner import MAX_ERROR_CHARS, MAX_TRACEBACK_CHARS, execute_run
from proctor.agent.store import load_samples
from proctor.agent.tracks.base import SampleContext
from tests.runner.conftest import make_config, quiet_progress, read_lines, write_tasks
from tests.runner.echo_track import EchoTrack
from tests.support.scripted_server import ScriptedServer

REPO = Path(__file__).resolve().parents[2]


class Unprintable(Exception):
    def __str__(self) -> str:
        raise ValueError("no message for you")


class HostileTrack(EchoTrack):
    """t00: exception with a broken __str__; t01: a 1 MB message; t02: returns no record."""

    name: ClassVar[str] = "echo"

    async def run_sample(self, task: Any, trial: int, ctx: SampleContext) -> SampleRecord:
        if task.id == "t00":
            raise Unprintable()
        if task.id == "t01":
            raise ValueError("\ud800" + "x" * 1_000_000)
        if task.id == "t02":
            return "not a record"  # type: ignore[return-value]
        return await super().run_sample(task, trial, ctx)


async def test_hostile_exceptions_become_bounded_harness_error_records(
    tmp_path: Path, echo_server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from proctor.agent.tracks import registry

    monkeypatch.setitem(registry._TRACKS, "echo", "tests.runner.test_harness_errors:HostileTrack")
    out = tmp_path / "run"
    config = make_config(write_tasks(tmp_path / "tasks.jsonl", 4), out, echo_server.base_url)
    result = await execute_run(config, progress=quiet_progress(), handle_signals=False)
    assert result.status == "finished" and result.finished == 4
    records = {r.task_id: r for r in load_samples(out / "samples.jsonl").records}
    assert records["t00"].outcome.value == "harness_error"
    assert records["t00"].error == "Unprintable: <message unavailable>"
    assert records["t01"].error is not None and len(records["t01"].error) <= MAX_ERROR_CHARS + 20
    assert records["t01"].error.startswith("ValueError: \\ud800xxx")  # surrogate spelled, not stored
    assert len(records["t01"].harness_traceback or "") <= MAX_TRACEBACK_CHARS + 10
    assert records["t02"].error == "TypeError: track echo returned str, not a SampleRecord"
    assert records["t03"].outcome.value == "correct"
    assert result.summary["overall"]["errors"]["harness_error"] == 3
    assert len(json.loads((out / "run.json").read_text())["sessions"][-1]["harness_errors"]) == 3


async def test_a_record_the_store_cannot_write_becomes_a_bare_harness_error(
    tmp_path: Path, echo_server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import proctor.agent.store

    real = proctor.agent.store.encode_record

    def picky(record: SampleRecord) -> Any:
        if record.task_id == "t01" and record.outcome.value != "harness_error":
            raise OSError(28, "No space left on device")
        return real(record)

    monkeypatch.setattr(proctor.agent.store, "encode_record", picky)
    out = tmp_path / "run"
    config = make_config(write_tasks(tmp_path / "tasks.jsonl", 3), out, echo_server.base_url)
    result = await execute_run(config, progress=quiet_progress(), handle_signals=False)
    assert result.status == "finished"
    outcomes = {r["task_id"]: (r["outcome"], r["error"]) for r in read_lines(out / "samples.jsonl")}
    assert outcomes["t01"] == ("harness_error", "OSError: [Errno 28] No space left on device")
    assert outcomes["t00"][0] == outcomes["t02"][0] == "correct"


class InterruptingTrack(EchoTrack):
    name: ClassVar[str] = "echo"

    async def run_sample(self, task: Any, trial: int, ctx: SampleContext) -> SampleRecord:
        if task.id == "t01":
            raise KeyboardInterrupt
        return await super().run_sample(task, trial, ctx)


def test_ctrl_c_inside_a_sample_still_stops_the_run_and_is_not_recorded(
    tmp_path: Path, echo_server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from proctor.agent.tracks import registry

    monkeypatch.setitem(registry._TRACKS, "echo", "tests.runner.test_harness_errors:InterruptingTrack")
    out = tmp_path / "run"
    config = make_config(
        write_tasks(tmp_path / "tasks.jsonl", 3), out, echo_server.base_url, max_concurrency=1
    )
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(execute_run(config, progress=quiet_progress(), handle_signals=False))
    outcomes = (
        [r["outcome"] for r in read_lines(out / "samples.jsonl")] if (out / "samples.jsonl").exists() else []
    )
    assert "harness_error" not in outcomes


def proctor(args: list[str], server: ScriptedServer) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_KEY": "test",
        "PYTHONPATH": str(REPO),
    }
    return subprocess.run(
        [sys.executable, "-m", "tests.runner.cli_with_test_tracks", "run", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_run_with_harness_bugs_exits_0_says_so_and_resume_reruns_them(
    tmp_path: Path, echo_server: ScriptedServer
) -> None:
    tasks = tmp_path / "tasks.jsonl"
    rows = [
        {"id": f"t{i}", "question": "say:crash" if i == 1 else f"say:a{i}", "answer": f"a{i}"}
        for i in range(3)
    ]
    tasks.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "run"
    args = ["--track", "echo-crash", "--tasks", str(tasks), "--model", "openai/echo-model", "--out", str(out)]
    done = proctor(args, echo_server)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert "1 sample(s) failed in the harness and are recorded as harness_error" in done.stdout
    assert json.loads((out / "run.json").read_text())["status"] == "finished"
    # Still broken: resume runs it again, and the new record supersedes the old one.
    done = proctor(["--resume", "--out", str(out)], echo_server)
    assert done.returncode == 0, done.stderr
    lines = read_lines(out / "samples.jsonl")
    assert [r["task_id"] for r in lines].count("t1") == 2
    assert len(load_samples(out / "samples.jsonl").records) == 3
    assert json.loads((out / "summary.json").read_text())["overall"]["errors"]["harness_error"] == 1
