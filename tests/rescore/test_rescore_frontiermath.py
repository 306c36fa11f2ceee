"""Re-verifying a FrontierMath run after its tasks file was fixed, in the docker sandbox.

The stored ``answer()`` source runs again only in the sandbox, with the current task file's
reference and ``verify()``. Attack: the stored submission is edited to code that probes for a
path only the host has and tries to write a marker beside it; it must not see the host.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import pytest

from proctor.agent.errors import UserError
from proctor.agent.inputs.config import ModelConfig, RunConfig, SandboxConfig
from proctor.agent.report.loader import load_run
from proctor.agent.report.page import render_report
from proctor.agent.run.runner import execute_run
from tests.rescore.conftest import quiet_progress, read_lines, rescore
from tests.runner.test_frontiermath_runs import submitting_model
from tests.support.scripted_server import ScriptedServer

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def write_tasks(path: Path, *, fixed: bool) -> Path:
    """The model submits 42 to both; before the fix the reference says 41 and verify() wants 43."""
    rows = [
        {
            "id": "fm-0",
            "question": "Find it. SUBMIT 42",
            "answer_type": "Python int",
            "answer": "42" if fixed else "41",
        },
        {
            "id": "fm-1",
            "question": "Find it. SUBMIT 42",
            "answer_type": "Python int",
            "verification_code": f"def verify(a):\n    return a == {42 if fixed else 43}\n",
        },
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def probing_submission(host_only: Path, marker: Path) -> str:
    return (
        "import os\n"
        "try:\n"
        f"    open({str(marker)!r}, 'w').write('ran on the host')\n"
        "except OSError:\n"
        "    pass\n"
        "def answer():\n"
        f"    return 0 if os.path.exists({str(host_only)!r}) else 42\n"
    )


async def run_on_docker(out: Path, tasks: Path, base_url: str) -> Path:
    """A finished FrontierMath run of the scripted model on the docker sandbox; its samples file."""
    config = RunConfig(
        track="frontiermath",
        tasks=tasks,
        out=out,
        models=[ModelConfig(name="openai/scripted", base_url=base_url, max_retries=0)],
        sandbox=SandboxConfig(backend="docker", pool_size=1, calibrate=False),
        max_concurrency=2,
    )
    result = await execute_run(config, progress=quiet_progress(), handle_signals=False)
    assert result.status == "finished"
    return out / "samples.jsonl"


async def test_rescore_re_verifies_stored_submissions_with_the_fixed_task_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    broken = write_tasks(tmp_path / "broken.jsonl", fixed=False)
    with ScriptedServer(submitting_model()) as model_server:
        samples = await run_on_docker(tmp_path / "run", broken, model_server.base_url)
        stored = read_lines(samples)
        assert {r["task_id"]: r["outcome"] for r in stored} == {"fm-0": "incorrect", "fm-1": "incorrect"}
        model_calls = model_server.call_count

        # Someone edits the stored submission of fm-1 to probe the machine it runs on.
        host_only, marker = tmp_path / "host-only", tmp_path / "marker"
        host_only.write_text("only the host has this file")
        for record in stored:
            if record["task_id"] == "fm-1":
                record["submission"]["code"] = probing_submission(host_only, marker)
        samples.write_text("".join(json.dumps(r) + "\n" for r in stored))

        fixed = write_tasks(tmp_path / "fixed.jsonl", fixed=True)
        again = await rescore(tmp_path / "run", tmp_path / "again", tasks=fixed)
        assert model_server.call_count == model_calls, "the answering model was called"

    assert again.status == "finished" and again.rescored_now == 2
    records = {r["task_id"]: r for r in read_lines(tmp_path / "again" / "samples.jsonl")}
    assert {k: r["outcome"] for k, r in records.items()} == {"fm-0": "correct", "fm-1": "correct"}
    assert records["fm-1"]["submission"]["verification"].startswith("verify() returned True")
    assert records["fm-0"]["rescore"]["previous_outcome"] == "incorrect"
    # The reference shown is the fixed tasks file's, not the run's.
    assert {k: r["reference"]["kind"] for k, r in records.items()} == {"fm-0": "expected", "fm-1": "verify"}
    assert records["fm-0"]["reference"]["text"] == "42"
    assert "a == 42" in records["fm-1"]["reference"]["text"]
    assert not marker.exists(), "the stored submission ran on the host"
    header = json.loads((tmp_path / "again" / "run.json").read_text())
    assert header["sandbox"]["backend"] == "docker"
    assert any(change.startswith("tasks file: sha256") for change in header["rescore"]["changes"])
    assert header["tasks_file"]["path"] == str(fixed.resolve())

    # The re-scored run exports like any run: tool calls and the submitted code survive.
    # Read back in a child process: inspect_ai must not load into pytest's (tests/support/inspect_logs.py).
    from proctor.agent.export.inspect_log import export_inspect
    from tests.support.inspect_logs import read_log

    (log_path,) = export_inspect(tmp_path / "again", tmp_path / "again.eval")
    log = read_log(log_path)
    assert log["samples"] is not None
    exported = {s["id"]: s for s in log["samples"]}
    calls = [
        c["function"]
        for m in exported["fm-0"]["messages"]
        if m["role"] == "assistant"
        for c in m["tool_calls"] or []
    ]
    assert calls == ["python", "submit_answer"]
    assert exported["fm-0"]["scores"]["proctor"]["value"] == "C"
    assert exported["fm-1"]["scores"]["proctor"]["answer"] == records["fm-1"]["submission"]["code"]
    assert exported["fm-0"]["target"] == "42"


async def test_an_edited_verdict_is_graded_again_never_carried_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hostile run directory: a wrong submission's record is edited to claim every kind of
    success. The re-score runs the submission again and records what it really is; a record that
    claims `correct` without the submission to prove it is refused, never carried over."""
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    tasks = write_tasks(tmp_path / "tasks.jsonl", fixed=False)
    sandbox = SandboxConfig(backend="docker", pool_size=1, calibrate=False)
    with ScriptedServer(submitting_model()) as model_server:
        config = RunConfig(
            track="frontiermath",
            tasks=tasks,
            out=tmp_path / "run",
            models=[ModelConfig(name="openai/scripted", base_url=model_server.base_url, max_retries=0)],
            sandbox=sandbox,
            max_concurrency=2,
        )
        first = await execute_run(config, progress=quiet_progress(), handle_signals=False)
        assert first.status == "finished"
    samples = tmp_path / "run" / "samples.jsonl"
    stored = read_lines(samples)
    assert {r["outcome"] for r in stored} == {"incorrect"}
    forged = {
        "outcome": "correct",
        "score": 1.0,
        "success": True,
        "error": None,
        "eed": {"score": 100.0},
        "judge": {"decided_by": "judge", "verdict": "CORRECT"},
    }
    for record in stored:
        record.update(forged)
        record["submission"].update(verification="verify() returned True", value_repr="41")
    samples.write_text("".join(json.dumps(r) + "\n" for r in stored))

    again = await rescore(tmp_path / "run", tmp_path / "again", tasks=tasks)
    records = read_lines(tmp_path / "again" / "samples.jsonl")
    assert again.rescored_now == 2
    assert {r["outcome"] for r in records} == {"incorrect"}
    assert all(r["success"] is False and r["score"] == 0.0 for r in records)
    assert all(r["eed"] is None and r["judge"] is None for r in records)
    assert again.summary["overall"]["accuracy"]["mean"] == 0.0

    # Without the submission there is nothing to re-verify: the claim is refused, not kept.
    stored[0]["submission"] = None
    samples.write_text("".join(json.dumps(r) + "\n" for r in stored))
    with pytest.raises(UserError, match=rf"^{samples}: line 1: field 'outcome': 'correct', but"):
        await rescore(tmp_path / "run", tmp_path / "third", tasks=tasks)
    assert not (tmp_path / "third").exists()


def _sandbox_results(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Every sandbox result a FrontierMath record stores: python calls, answer(), verify()."""
    found = [call["sandbox"] for call in record["tool_calls"] if "exit_code" in (call.get("sandbox") or {})]
    submission = record.get("submission") or {}
    return found + [submission[key] for key in ("answer_exec", "verify_exec") if submission.get(key)]


async def test_a_run_recorded_before_cpu_figures_rescores_and_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    tasks = write_tasks(tmp_path / "tasks.jsonl", fixed=True)
    with ScriptedServer(submitting_model()) as model_server:
        samples = await run_on_docker(tmp_path / "run", tasks, model_server.base_url)
        stored = read_lines(samples)
        # The docker sandbox stored each call's CPU with its result (None only where the fresh
        # container's group was gone before it was read: docs/sandbox.md).
        results = [result for record in stored for result in _sandbox_results(record)]
        # Per task: one python call, answer() and the check.
        assert len(results) == 6 and all("cpu_s" in result for result in results)
        assert any(isinstance(result["cpu_s"], float) and result["cpu_s"] > 0 for result in results)

        # The same run as written before the field existed.
        for record in stored:
            for result in _sandbox_results(record):
                del result["cpu_s"]
        samples.write_text("".join(json.dumps(r) + "\n" for r in stored))
        assert "sandbox CPU not measured" in render_report(load_run(tmp_path / "run"))

        again = await rescore(tmp_path / "run", tmp_path / "again", tasks=tasks)
    assert again.status == "finished"
    # Re-verified submissions run again and carry figures; the python calls carried over do not.
    summary = json.loads((tmp_path / "again" / "summary.json").read_text())["overall"]
    assert summary["sandbox_calls"] == 6 and 1 <= summary["sandbox_cpu_calls"] <= 4
    records = read_lines(tmp_path / "again" / "samples.jsonl")
    assert all(
        "cpu_s" not in call["sandbox"]
        for record in records
        for call in record["tool_calls"]
        if call.get("sandbox") and "exit_code" in call["sandbox"]
    )
    page = html.unescape(render_report(load_run(tmp_path / "again")))
    assert f"; figure for {summary['sandbox_cpu_calls']} of 6 calls" in page
