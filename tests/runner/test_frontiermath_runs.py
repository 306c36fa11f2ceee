"""`proctor run --track frontiermath` end to end: a real process, the real loop and the local sandbox.

The scripted model computes with the python tool once, then submits ``answer()``. The
submission really runs in the sandbox and is really verified, so correct and incorrect
outcomes come from the pipeline, not from the script.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tests.runner.conftest import read_lines
from tests.support.scripted_server import Reply, ReportedUsage, ScriptedServer, Step, ToolCallSpec

REPO = Path(__file__).resolve().parents[2]


def submitting_model(delay_s: float = 0.0) -> Any:
    """Turn 1: python print(6*7). Turn 2: submit answer() returning the number in the question."""

    def script(request: dict[str, Any], index: int) -> Step:
        messages = request["messages"]
        wanted = re.search(r"SUBMIT (\d+)", messages[0]["content"])
        assistant_turns = sum(1 for m in messages if m["role"] == "assistant")
        usage = ReportedUsage(prompt_tokens=1000 + 100 * assistant_turns, completion_tokens=50)
        if assistant_turns == 0:
            return Reply(tool_calls=[ToolCallSpec("python", json.dumps({"code": "print(6*7)"}))], usage=usage)
        code = f"def answer():\n    return {wanted.group(1) if wanted else 0}\n"
        return Reply(
            tool_calls=[ToolCallSpec("submit_answer", json.dumps({"code": code}))],
            usage=usage,
            delay_s=delay_s,
        )

    return script


def write_fm_tasks(path: Path, count: int) -> Path:
    """Task i expects 40 + i; the model submits 42 for even i and 40 + i for odd i."""
    lines = []
    for i in range(count):
        submitted = 40 + i if i % 2 else 42
        lines.append(
            json.dumps(
                {
                    "id": f"fm-{i}",
                    "question": f"Find the number. (scripted model: SUBMIT {submitted})",
                    "answer_type": "Python int",
                    "answer": str(40 + i),
                    "subject": "number theory" if i % 2 else "algebra",
                }
            )
        )
    path.write_text("\n".join(lines) + "\n")
    return path


def proctor(args: list[str], server: ScriptedServer) -> subprocess.Popen[str]:
    env = {**os.environ, "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "test"}
    return subprocess.Popen(
        [
            "proctor",
            "run",
            "--track",
            "frontiermath",
            "--model",
            "openai/scripted",
            "--backend",
            "local",
            *args,
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_frontiermath_run_scores_through_the_real_pipeline(tmp_path: Path):
    tasks = write_fm_tasks(tmp_path / "tasks.jsonl", 4)
    out = tmp_path / "run"
    with ScriptedServer(submitting_model()) as server:
        process = proctor(["--tasks", str(tasks), "--out", str(out), "--max-concurrency", "2"], server)
        output, _ = process.communicate(timeout=240)
    assert process.returncode == 0, output
    records = {r["task_id"]: r for r in read_lines(out / "samples.jsonl")}
    # fm-0 expects 40 (got 42), fm-1 41 (got 41), fm-2 42 (got 42), fm-3 43 (got 43).
    assert {k: r["outcome"] for k, r in records.items()} == {
        "fm-0": "incorrect",
        "fm-1": "correct",
        "fm-2": "correct",
        "fm-3": "correct",
    }
    first = records["fm-1"]
    assert first["tool_calls"][0]["name"] == "python" and "42" in first["tool_calls"][0]["result"]
    assert first["total_tokens"] == (1000 + 50) + (1100 + 50)
    header = json.loads((out / "run.json").read_text())
    assert header["sandbox"]["backend"] == "local" and header["sandbox_isolates_less"] is True
    summary = json.loads((out / "summary.json").read_text())
    assert summary["overall"]["accuracy"]["mean"] == 0.75
    assert summary["by_subject"]["algebra"]["accuracy"]["mean"] == 0.5
    # One python call plus answer() and the typed comparison per sample.
    assert summary["overall"]["sandbox_calls"] == 4 * 3
    assert f"proctor view {out}" in output


def test_frontiermath_run_killed_mid_run_then_resumed_has_each_sample_once(tmp_path: Path):
    tasks = write_fm_tasks(tmp_path / "tasks.jsonl", 6)
    out = tmp_path / "run"
    samples = out / "samples.jsonl"
    with ScriptedServer(submitting_model(delay_s=0.3)) as server:
        process = proctor(
            ["--tasks", str(tasks), "--out", str(out), "--trials", "2", "--max-concurrency", "2"], server
        )
        deadline = time.monotonic() + 120
        while not (samples.exists() and samples.read_bytes().count(b"\n") >= 3):
            assert process.poll() is None and time.monotonic() < deadline, process.communicate()[0]
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=30)
        assert len(read_lines(samples)) < 12

        resumed = proctor(["--tasks", str(tasks), "--out", str(out), "--trials", "2", "--resume"], server)
        output, _ = resumed.communicate(timeout=240)
    assert resumed.returncode == 0, output
    keys = Counter((r["task_id"], r["trial"]) for r in read_lines(samples))
    assert set(keys) == {(f"fm-{i}", t) for i in range(6) for t in range(2)}
    assert set(keys.values()) == {1}
    assert json.loads((out / "summary.json").read_text())["finished_samples"] == 12
