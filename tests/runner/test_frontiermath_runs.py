"""`proctor run --track frontiermath` end to end: a real process, the real loop and the local sandbox.

The scripted model computes with the python tool once, then submits ``answer()``. The
submission really runs in the sandbox and is really verified, so correct and incorrect
outcomes come from the pipeline, not from the script.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import re
import signal
import socket
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

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
            # The scripted model answers by turn; these tests are about the run, not the preflight.
            "--no-preflight",
            *args,
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def importable_pins() -> dict[str, str]:
    """The pinned libraries this host's Python can import, with their installed versions."""
    from proctor.sandbox.docker.image import top_level_pins

    found = {}
    for name in top_level_pins():
        try:
            importlib.import_module(name)
        except Exception:  # any failure to import means: not offered
            continue
        found[name] = importlib.metadata.version(name)
    return found


@pytest.mark.slow  # 8-25 s of a quick tier that must stay under 5 minutes; the full suite runs it
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
    # The explicit local backend warned (printed before the run), and run.json and the summary say so.
    assert "proctor: warning: sandbox backend 'local' isolates less than docker" in output
    assert "isolates less than docker" in header["sandbox"]["warning"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["sandbox"]["backend"] == "local" and summary["sandbox"]["isolates_less"] is True
    assert summary["sandbox"]["warning"] == header["sandbox"]["warning"]
    # The prompt offered exactly the pinned libraries that import here, at the versions found.
    offered = header["sandbox"]["libraries"]
    assert offered == importable_pins() and summary["sandbox"]["libraries"] == offered
    prompt = server.requests[0].json["messages"][0]["content"]
    listed = {line.strip().removeprefix("• ") for line in prompt.splitlines() if "==" in line}
    assert listed == {f"{name}=={version}" for name, version in offered.items()}
    assert summary["overall"]["accuracy"]["mean"] == 0.75
    assert summary["by_subject"]["algebra"]["accuracy"]["mean"] == 0.5
    # One python call plus answer() and the typed comparison per sample.
    assert summary["overall"]["sandbox_calls"] == 4 * 3
    # Each of them stored the CPU its call's group counted (the local backend's cpuacct group),
    # and the summary took every one.
    for record in records.values():
        results = [record["tool_calls"][0]["sandbox"], record["submission"]["answer_exec"]]
        results.append(record["submission"]["verify_exec"])
        assert all(isinstance(result["cpu_s"], float) and result["cpu_s"] > 0 for result in results), results
    assert summary["overall"]["sandbox_cpu_calls"] == 4 * 3
    assert summary["overall"]["sandbox_cpu_per_wall_second"]["samples"] == 4
    assert f"proctor view {out}" in output


@pytest.mark.slow  # 8-25 s of a quick tier that must stay under 5 minutes; the full suite runs it
def test_protocol_flag_is_followed_and_recorded_in_run_json(tmp_path: Path):
    tasks = write_fm_tasks(tmp_path / "tasks.jsonl", 2)
    out = tmp_path / "run"
    with ScriptedServer(submitting_model()) as server:
        process = proctor(["--tasks", str(tasks), "--out", str(out), "--protocol", "inspect-example"], server)
        output, _ = process.communicate(timeout=240)
    assert process.returncode == 0, output
    header = json.loads((out / "run.json").read_text())
    assert header["config"]["protocol"] == "inspect-example"
    assert header["protocol"]["name"] == "inspect-example"
    assert header["protocol"]["submission_pick"] == "last"
    # The profile really ran: a usage report follows the python turn, in the next request.
    second = next(r.json for r in server.requests if any(m["role"] == "tool" for m in r.json["messages"]))
    assert second["messages"][-1]["role"] == "user"
    assert second["messages"][-1]["content"].startswith("Tokens used so far: 1,050.")
    records = read_lines(out / "samples.jsonl")
    assert {r["outcome"] for r in records} == {"correct", "incorrect"}


def test_unknown_protocol_flag_is_one_line_and_exit_2(tmp_path: Path):
    tasks = write_fm_tasks(tmp_path / "tasks.jsonl", 1)
    with ScriptedServer([]) as server:
        process = proctor(["--tasks", str(tasks), "--protocol", "inspekt"], server)
        output, _ = process.communicate(timeout=60)
    assert process.returncode == 2 and "Traceback" not in output
    assert output.strip() == (
        "proctor: error: command line: field 'protocol': unknown protocol 'inspekt'; "
        "choose one of: methodology, inspect-example"
    )
    assert server.call_count == 0


@pytest.mark.slow  # 8-25 s of a quick tier that must stay under 5 minutes; the full suite runs it
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


def refused_run(tmp_path: Path, extra_env: dict[str, str], config: str) -> subprocess.CompletedProcess[str]:
    tasks = write_fm_tasks(tmp_path / "tasks.jsonl", 1)
    config_file = tmp_path / "run.yaml"
    config_file.write_text(config)
    env = {**os.environ, "OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "test", **extra_env}
    return subprocess.run(
        [
            *("proctor", "run", str(config_file), "--track", "frontiermath", "--model", "openai/scripted"),
            *("--tasks", str(tasks), "--out", str(tmp_path / "run")),
            # The endpoint is a dead port on purpose: the sandbox refusal is what is under test.
            "--no-preflight",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def assert_refused_without_running(
    done: subprocess.CompletedProcess[str], tmp_path: Path, cause: str, fix: str
) -> None:
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("proctor: error:"), done.stderr
    for needle in ("backend auto", cause, fix, "--backend local"):
        assert needle in lines[0]
    # Neither a stopped engine nor an image the user named is fixed by building the pinned image.
    assert "proctor image build" not in lines[0]
    assert not (tmp_path / "run" / "samples.jsonl").exists()
    assert not (tmp_path / "run" / "run.json").exists()


def test_run_with_auto_and_no_engine_is_refused_before_anything_runs(tmp_path: Path):
    dead = tmp_path / "docker.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(dead))
    listener.close()
    done = refused_run(tmp_path, {"DOCKER_HOST": f"unix://{dead}"}, "sandbox:\n  backend: auto\n")
    assert_refused_without_running(done, tmp_path, f"no Docker engine answers at unix://{dead}", "start it")


@pytest.mark.docker
def test_run_with_auto_and_a_missing_image_is_refused_before_anything_runs(tmp_path: Path):
    missing = "proctor/no-such-image:000000000000"
    done = refused_run(tmp_path, {}, f"sandbox:\n  backend: auto\n  image: {missing}\n")
    assert_refused_without_running(
        done, tmp_path, f"sandbox image {missing} is not in the engine at", "pull or build it"
    )
