"""The runner end to end, in process: real model client + openai SDK against a scripted server."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any, ClassVar

import pytest

from proctor.agent.errors import UserError
from proctor.agent.inputs.config import ModelConfig
from proctor.agent.results.records import SampleRecord
from proctor.agent.results.store import load_samples
from proctor.agent.run.runner import execute_run
from proctor.agent.run.sample_plan import default_run_dir
from proctor.agent.tracks.base import SampleContext
from tests.runner.conftest import make_config, quiet_progress, read_lines, write_tasks
from tests.runner.echo_track import EchoTrack
from tests.support.scripted_server import HttpError, ScriptedServer


async def run(config: Any) -> Any:
    return await execute_run(config, progress=quiet_progress(), handle_signals=False)


async def test_every_model_task_trial_runs_once_and_is_summarised(
    tmp_path: Path, echo_server: ScriptedServer
):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 4, wrong={3})
    models = [
        ModelConfig(name="openai/m1", base_url=echo_server.base_url, max_retries=0),
        ModelConfig(name="openai/m2", base_url=echo_server.base_url, max_retries=0, reasoning_effort="low"),
    ]
    out = tmp_path / "run"
    result = await run(
        make_config(tasks, out, echo_server.base_url, models=models, trials=3, max_concurrency=5)
    )

    records = read_lines(out / "samples.jsonl")
    keys = Counter((r["model"], r["task_id"], r["trial"]) for r in records)
    assert len(keys) == 2 * 4 * 3 and set(keys.values()) == {1}
    assert echo_server.call_count == 24
    assert result.status == "finished"
    header = json.loads((out / "run.json").read_text())
    assert header["status"] == "finished" and header["ended_at"]
    assert header["config"]["trials"] == 3 and header["tasks_file"]["sha256"]
    assert header["versions"]["openai"] and header["versions"]["sympy"] == "1.13.3"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["overall"]["accuracy"]["mean"] == pytest.approx(0.75)
    assert summary["by_model"]["openai/m2"]["samples"] == 12
    assert set(summary["by_reasoning_effort"]) == {"low", "(default)"}
    assert set(summary["by_subject"]) == {"algebra", "geometry"}
    assert all(r["reasoning_effort"] == "low" for r in records if r["model"] == "openai/m2")


class GateTrack(EchoTrack):
    """Task t01 finishes only once t00's record is already on disk (or gives up after 5 s)."""

    name: ClassVar[str] = "echo"
    seen_on_disk: ClassVar[list[bool]] = []

    async def run_sample(self, task: Any, trial: int, ctx: SampleContext) -> SampleRecord:
        record = await super().run_sample(task, trial, ctx)
        if task.id == "t01":
            samples = Path(ctx.config.out or "") / "samples.jsonl"
            for _ in range(500):
                if samples.exists() and '"task_id":"t00"' in samples.read_text():
                    GateTrack.seen_on_disk.append(True)
                    break
                await asyncio.sleep(0.01)
            else:
                GateTrack.seen_on_disk.append(False)
        return record


async def test_a_record_is_on_disk_as_soon_as_its_sample_finishes(
    tmp_path: Path, echo_server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
):
    from proctor.agent.tracks import registry

    monkeypatch.setitem(registry._TRACKS, "echo", "tests.runner.test_runner:GateTrack")
    GateTrack.seen_on_disk.clear()
    tasks = write_tasks(tmp_path / "tasks.jsonl", 2)
    await run(make_config(tasks, tmp_path / "run", echo_server.base_url, max_concurrency=2))
    # t01 was still running (not returned to the runner) when t00's line was readable.
    assert GateTrack.seen_on_disk == [True]


async def test_resume_runs_only_missing_triples_including_new_models_and_trials(
    tmp_path: Path, echo_server: ScriptedServer
):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 3)
    out = tmp_path / "run"
    await run(make_config(tasks, out, echo_server.base_url, trials=1))
    assert echo_server.call_count == 3

    second = ModelConfig(name="openai/other", base_url=echo_server.base_url, max_retries=0)
    first = ModelConfig(name="openai/echo-model", base_url=echo_server.base_url, max_retries=0)
    result = await run(
        make_config(tasks, out, echo_server.base_url, trials=2, resume=True, models=[first, second])
    )
    # Missing: trial 1 of the first model (3) + both trials of the new model (6).
    assert echo_server.call_count == 3 + 9
    assert result.ran_now == 9 and result.finished == 12
    keys = Counter((r["model"], r["task_id"], r["trial"]) for r in read_lines(out / "samples.jsonl"))
    assert len(keys) == 12 and set(keys.values()) == {1}
    header = json.loads((out / "run.json").read_text())
    assert [s["already_done"] for s in header["sessions"]] == [0, 3]

    again = await run(
        make_config(tasks, out, echo_server.base_url, trials=2, resume=True, models=[first, second])
    )
    assert again.ran_now == 0 and echo_server.call_count == 12


async def test_torn_last_line_is_cut_and_that_sample_rerun(tmp_path: Path, echo_server: ScriptedServer):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 3)
    out = tmp_path / "run"
    await run(make_config(tasks, out, echo_server.base_url))
    samples = out / "samples.jsonl"
    lines = samples.read_bytes().splitlines(keepends=True)
    # Simulate a crash mid-write of the last record: keep only half of it, no newline.
    samples.write_bytes(b"".join(lines[:2]) + lines[2][: len(lines[2]) // 2])
    torn_task = json.loads(lines[2])["task_id"]

    result = await run(make_config(tasks, out, echo_server.base_url, resume=True))
    assert result.ran_now == 1
    records = read_lines(samples)
    assert sorted(r["task_id"] for r in records) == ["t00", "t01", "t02"]
    assert records[-1]["task_id"] == torn_task
    header = json.loads((out / "run.json").read_text())
    assert header["sessions"][-1]["torn_bytes_removed"] == len(lines[2]) // 2


def test_loader_keeps_a_complete_last_record_missing_only_its_newline(tmp_path: Path):
    record = SampleRecord(
        run_id="r",
        track="echo",
        task_id="t",
        trial=0,
        model="m",
        outcome="correct",
        started_at="x",
        finished_at="y",
        duration_s=1.0,
    )
    path = tmp_path / "samples.jsonl"
    path.write_text(record.model_dump_json())
    loaded = load_samples(path, repair=True)
    assert [r.task_id for r in loaded.records] == ["t"] and loaded.torn_bytes == 0
    assert path.read_text().endswith("\n")


def test_loader_reports_corruption_before_the_last_line_with_its_line_number(tmp_path: Path):
    path = tmp_path / "samples.jsonl"
    path.write_text('{"not": "a record"}\n{"also": "bad"}\n')
    with pytest.raises(UserError, match=r"samples.jsonl: line 1: field '"):
        load_samples(path)


async def test_resume_refuses_a_different_tasks_file_or_track(tmp_path: Path, echo_server: ScriptedServer):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 2)
    out = tmp_path / "run"
    await run(make_config(tasks, out, echo_server.base_url))
    write_tasks(tasks, 3)  # same path, new content
    with pytest.raises(UserError, match=r"cannot resume.*tasks file"):
        await run(make_config(tasks, out, echo_server.base_url, resume=True))
    write_tasks(tasks, 2)
    with pytest.raises(UserError, match=r"cannot resume.*track was 'echo', now 'echo-sandbox'"):
        await run(make_config(tasks, out, echo_server.base_url, resume=True, track="echo-sandbox"))


async def test_a_fresh_run_refuses_a_directory_that_holds_samples(
    tmp_path: Path, echo_server: ScriptedServer
):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 1)
    out = tmp_path / "run"
    await run(make_config(tasks, out, echo_server.base_url))
    with pytest.raises(UserError, match="--resume"):
        await run(make_config(tasks, out, echo_server.base_url))


class FlakyTrack(EchoTrack):
    """t01 hits a harness bug the first time: it must stay unrecorded, so resume retries it."""

    name: ClassVar[str] = "echo"
    broken: ClassVar[bool] = True

    async def run_sample(self, task: Any, trial: int, ctx: SampleContext) -> SampleRecord:
        if task.id == "t01" and FlakyTrack.broken:
            raise RuntimeError("harness bug")
        return await super().run_sample(task, trial, ctx)


async def test_a_harness_failure_is_recorded_apart_and_resume_reruns_it(
    tmp_path: Path, echo_server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
):
    from proctor.agent.tracks import registry

    monkeypatch.setitem(registry._TRACKS, "echo", "tests.runner.test_runner:FlakyTrack")
    tasks = write_tasks(tmp_path / "tasks.jsonl", 3)
    out = tmp_path / "run"
    FlakyTrack.broken = True
    result = await run(make_config(tasks, out, echo_server.base_url))
    assert result.status == "finished" and len(result.harness_errors) == 1
    assert "harness bug" in result.harness_errors[0]
    records = {r["task_id"]: r for r in read_lines(out / "samples.jsonl")}
    assert sorted(records) == ["t00", "t01", "t02"]
    broken = records["t01"]
    assert broken["outcome"] == "harness_error" and broken["error"] == "RuntimeError: harness bug"
    assert "raise RuntimeError" in broken["harness_traceback"]
    assert result.summary["overall"]["errors"]["harness_error"] == 1
    assert result.summary["overall"]["accuracy"]["mean"] == 1.0  # counted apart, not as a failure
    assert json.loads((out / "run.json").read_text())["status"] == "finished"

    FlakyTrack.broken = False
    result = await run(make_config(tasks, out, echo_server.base_url, resume=True))
    assert result.status == "finished" and result.ran_now == 1
    header = json.loads((out / "run.json").read_text())
    assert header["sessions"][-1]["already_done"] == 2
    # The rerun's record supersedes the harness_error line for every reader.
    lines = read_lines(out / "samples.jsonl")
    assert [r["task_id"] for r in lines].count("t01") == 2
    loaded = load_samples(out / "samples.jsonl")
    assert {r.task_id: r.outcome.value for r in loaded.records}["t01"] == "correct"
    assert loaded.duplicates == []
    assert result.summary["overall"]["errors"]["harness_error"] == 0
    assert result.summary["finished_samples"] == 3


async def test_model_failure_becomes_a_model_error_record_counted_apart(tmp_path: Path):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 2)
    # An auth error is never retried: the client raises ModelError for good.
    with ScriptedServer(lambda request, index: HttpError(401, "bad key")) as server:
        result = await run(make_config(tasks, tmp_path / "run", server.base_url))
    records = read_lines(tmp_path / "run" / "samples.jsonl")
    assert {r["outcome"] for r in records} == {"model_error"}
    overall = result.summary["overall"]
    assert overall["errors"]["model_error"] == 2
    assert overall["accuracy"] is None  # nothing was scored
    assert overall["accuracy_errors_as_failures"]["mean"] == 0.0


async def test_resume_reruns_error_outcomes_once_the_endpoint_is_fixed(
    tmp_path: Path, echo_server: ScriptedServer
):
    # model_error, like every error outcome, says nothing about the model: --resume runs it again.
    tasks = write_tasks(tmp_path / "tasks.jsonl", 2)
    out = tmp_path / "run"
    with ScriptedServer(lambda request, index: HttpError(401, "bad key")) as broken:
        await run(make_config(tasks, out, broken.base_url))
    assert {r["outcome"] for r in read_lines(out / "samples.jsonl")} == {"model_error"}
    # The fixed endpoint is another server here: a resume there must be allowed explicitly.
    result = await execute_run(
        make_config(tasks, out, echo_server.base_url, resume=True),
        progress=quiet_progress(),
        handle_signals=False,
        allow_endpoint_change=True,
    )
    assert result.ran_now == 2
    assert json.loads((out / "run.json").read_text())["events"][0]["to"] == echo_server.base_url
    loaded = load_samples(out / "samples.jsonl")
    assert {r.outcome.value for r in loaded.records} == {"correct"} and loaded.duplicates == []
    assert result.summary["overall"]["errors"]["model_error"] == 0


async def test_task_filter_and_limit_select_tasks(tmp_path: Path, echo_server: ScriptedServer):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 5)
    result = await run(
        make_config(tasks, tmp_path / "a", echo_server.base_url, task_filter={"quickstart": True})
    )
    assert result.planned == 2
    result = await run(make_config(tasks, tmp_path / "b", echo_server.base_url, limit_tasks=3))
    assert sorted(r["task_id"] for r in read_lines(tmp_path / "b" / "samples.jsonl")) == ["t00", "t01", "t02"]
    # A filter no task matches names the values the tasks do hold (issue 24).
    with pytest.raises(
        UserError, match=r"no task has quickstart=nope; the tasks hold false \(3\), true \(2\)"
    ):
        await run(
            make_config(tasks, tmp_path / "c", echo_server.base_url, task_filter={"quickstart": "nope"})
        )


async def test_sandbox_is_opened_once_for_the_run_and_described_in_the_header(
    tmp_path: Path, echo_server: ScriptedServer
):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 2)
    out = tmp_path / "run"
    config = make_config(tasks, out, echo_server.base_url, track="echo-sandbox")
    config.sandbox.backend = "local"
    result = await run(config)
    assert result.status == "finished"
    header = json.loads((out / "run.json").read_text())
    assert header["sandbox"]["backend"] == "local"
    assert header["sandbox_isolates_less"] is True
    records = read_lines(out / "samples.jsonl")
    assert all(r["tool_calls"][0]["result"].strip() == "42" for r in records)
    assert result.summary["overall"]["sandbox_calls"] == 2


def test_default_run_dir_names_time_track_and_model(tmp_path: Path):
    config = make_config(tmp_path / "t.jsonl", None, "http://127.0.0.1:1/v1")  # type: ignore[arg-type]
    path = default_run_dir(config)
    assert path.parent == Path("runs")
    assert path.name.endswith("-echo-echo-model")
