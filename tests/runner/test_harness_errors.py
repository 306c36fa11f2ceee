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

from proctor.agent.inputs.config import ModelConfig
from proctor.agent.model.base import ModelError
from proctor.agent.results.records import ReferenceRecord, SampleRecord
from proctor.agent.results.store import load_samples
from proctor.agent.run.failure_records import MAX_ERROR_CHARS, MAX_TRACEBACK_CHARS
from proctor.agent.run.runner import execute_run
from proctor.agent.tracks.base import SampleContext
from proctor.agent.tracks.frontiermath.track import FrontierMathTrack
from proctor.agent.tracks.olympiad import OlympiadTrack
from proctor.agent.tracks.phybench import PhybenchTrack
from proctor.agent.tracks.research import ResearchTrack
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
    import proctor.agent.results.store

    real = proctor.agent.results.store.encode_record

    def picky(record: SampleRecord) -> Any:
        if record.task_id == "t01" and record.outcome.value != "harness_error":
            raise OSError(28, "No space left on device")
        return real(record)

    monkeypatch.setattr(proctor.agent.results.store, "encode_record", picky)
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


def test_cli_run_with_harness_bugs_exits_3_says_so_and_resume_reruns_them(
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
    # A sample without a result means the run is not done (--fail-on-error's default).
    assert done.returncode == 3, done.stderr
    assert "1 of 3 samples ended in errors (harness_error 1)" in done.stdout
    assert "Traceback" not in done.stderr + done.stdout
    assert "1 sample(s) failed in the harness and are recorded as harness_error" in done.stdout
    assert json.loads((out / "run.json").read_text())["status"] == "finished"
    # Still broken: resume runs it again, and the new record supersedes the old one.
    done = proctor(["--resume", "--out", str(out)], echo_server)
    assert done.returncode == 3, done.stderr
    lines = read_lines(out / "samples.jsonl")
    assert [r["task_id"] for r in lines].count("t1") == 2
    assert len(load_samples(out / "samples.jsonl").records) == 3
    assert json.loads((out / "summary.json").read_text())["overall"]["errors"]["harness_error"] == 1


# -- every record carries its reference --------------------------------------------------------


class _FailsEverySample:
    """Task ``*-bug``: a harness bug (harness_error); any other: a ModelError the track lets out,
    which the runner records as the model_error it is (the fallback record)."""

    needs_sandbox: ClassVar[bool] = False
    needs_judge: ClassVar[bool] = False

    async def run_sample(self, task: Any, trial: int, ctx: SampleContext) -> SampleRecord:
        if str(task.id).endswith("-bug"):
            raise RuntimeError("a harness bug")
        raise ModelError("the endpoint failed for good")


class FailingOlympiad(_FailsEverySample, OlympiadTrack):
    pass


class FailingResearch(_FailsEverySample, ResearchTrack):
    pass


class FailingPhybench(_FailsEverySample, PhybenchTrack):
    pass


class FailingFrontierMath(_FailsEverySample, FrontierMathTrack):
    pass


FAILING = {
    "olympiad": "FailingOlympiad",
    "research": "FailingResearch",
    "phybench": "FailingPhybench",
    "frontiermath": "FailingFrontierMath",
}
VERIFY = "def verify(a):\n    return a == 7\n"


def _failing_tasks(track: str, path: Path) -> dict[str, dict[str, str | None]]:
    """Two tasks (a harness bug, a fallback), and the reference each record must carry."""
    if track == "frontiermath":
        rows = [
            {"id": "fm-bug", "question": "Q", "answer_type": "Python int", "answer": "41"},
            {"id": "fm-fallback", "question": "Q", "answer_type": "Python int", "verification_code": VERIFY},
        ]
        expected = {
            "fm-bug": {"kind": "expected", "text": "41"},
            "fm-fallback": {"kind": "verify", "text": VERIFY},
        }
    else:
        kind = "rubric" if track == "research" else "answer"
        rows = [
            {"id": "s-bug", "question": "Q", "answer": "E = mc^2"},
            {"id": "s-fallback", "question": "Q", "answer": "\\frac{1}{2}"},
        ]
        expected = {row["id"]: {"kind": kind, "text": row["answer"]} for row in rows}
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return expected


@pytest.mark.parametrize("track", sorted(FAILING))
async def test_harness_error_and_fallback_records_carry_their_reference(
    track: str, tmp_path: Path, echo_server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from proctor.agent.tracks import registry

    monkeypatch.setitem(registry._TRACKS, track, f"tests.runner.test_harness_errors:{FAILING[track]}")
    expected = _failing_tasks(track, tmp_path / "tasks.jsonl")
    out = tmp_path / "run"
    judge = ModelConfig(name="openai/echo-judge", base_url=echo_server.base_url, max_retries=0)
    config = make_config(
        tmp_path / "tasks.jsonl", out, echo_server.base_url, track=track, judge=judge, trials=1
    )
    result = await execute_run(config, progress=quiet_progress(), handle_signals=False)
    assert result.finished == 2
    records = {r["task_id"]: r for r in read_lines(out / "samples.jsonl")}
    assert {k: r["outcome"] for k, r in records.items()} == {
        k: ("harness_error" if k.endswith("-bug") else "model_error") for k in expected
    }
    for task_id, reference in expected.items():
        # The same record a graded sample of the task carries (the track's reference_for).
        assert {k: records[task_id]["reference"][k] for k in reference} == reference, task_id


class _UnreferencableTrack(EchoTrack):
    """A track whose reference cannot be computed for t01: the record must still be kept."""

    name: ClassVar[str] = "echo"

    def reference_for(self, task: Any) -> ReferenceRecord | None:
        if task.id == "t01":
            raise ValueError("no reference for this task")
        return ReferenceRecord(kind="answer", text=task.answer)

    async def run_sample(self, task: Any, trial: int, ctx: SampleContext) -> SampleRecord:
        raise RuntimeError("a harness bug")


async def test_a_reference_that_cannot_be_computed_never_costs_the_record(
    tmp_path: Path, echo_server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from proctor.agent.tracks import registry

    monkeypatch.setitem(registry._TRACKS, "echo", "tests.runner.test_harness_errors:_UnreferencableTrack")
    out = tmp_path / "run"
    config = make_config(write_tasks(tmp_path / "tasks.jsonl", 2), out, echo_server.base_url)
    result = await execute_run(config, progress=quiet_progress(), handle_signals=False)
    assert result.finished == 2
    records = {r["task_id"]: r for r in read_lines(out / "samples.jsonl")}
    assert records["t00"]["reference"] == {"kind": "answer", "text": "a0", "tolerance": None}
    assert records["t01"]["outcome"] == "harness_error" and records["t01"]["reference"] is None


class _ReferencedEcho(EchoTrack):
    name: ClassVar[str] = "echo"

    def reference_for(self, task: Any) -> ReferenceRecord | None:
        return ReferenceRecord(kind="answer", text=task.answer)


async def test_a_record_the_store_refuses_is_kept_with_its_reference_or_bare_if_that_is_refused(
    tmp_path: Path, echo_server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import proctor.agent.results.store
    from proctor.agent.tracks import registry

    monkeypatch.setitem(registry._TRACKS, "echo", "tests.runner.test_harness_errors:_ReferencedEcho")
    real = proctor.agent.results.store.encode_record

    def picky(record: SampleRecord) -> Any:
        # t01: only its graded record is refused. t02: anything carrying a reference is refused.
        if record.task_id == "t01" and record.outcome.value != "harness_error":
            raise OSError(28, "No space left on device")
        if record.task_id == "t02" and record.reference is not None:
            raise ValueError("the reference cannot be stored")
        return real(record)

    monkeypatch.setattr(proctor.agent.results.store, "encode_record", picky)
    out = tmp_path / "run"
    config = make_config(write_tasks(tmp_path / "tasks.jsonl", 3), out, echo_server.base_url)
    result = await execute_run(config, progress=quiet_progress(), handle_signals=False)
    assert result.status == "finished" and result.finished == 3
    records = {r["task_id"]: r for r in read_lines(out / "samples.jsonl")}
    assert records["t00"]["outcome"] == "correct" and records["t00"]["reference"]["text"] == "a0"
    assert records["t01"]["outcome"] == "harness_error" and records["t01"]["reference"]["text"] == "a1"
    assert records["t02"]["outcome"] == "harness_error" and records["t02"]["reference"] is None
