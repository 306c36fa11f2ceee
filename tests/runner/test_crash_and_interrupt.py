"""A real `proctor run` process, killed or interrupted mid-run, then resumed.

The process talks to a scripted server through the openai SDK; replies are slowed a little
so the signal reliably lands while samples are in flight.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.runner.conftest import read_lines, write_tasks
from tests.support.scripted_server import ScriptedServer

REPO = Path(__file__).resolve().parents[2]


def proctor(args: list[str], server: ScriptedServer) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_KEY": "test",
        "PYTHONUNBUFFERED": "1",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "tests.runner.cli_with_test_tracks", "run", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_for_lines(path: Path, count: int, process: subprocess.Popen[str], timeout: float = 30.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, f"runner exited early: {process.communicate()[0]}"
        if path.exists():
            lines = path.read_bytes().count(b"\n")
            if lines >= count:
                return lines
        time.sleep(0.02)
    raise AssertionError(f"fewer than {count} records after {timeout}s")


def run_args(tasks: Path, out: Path, *extra: str) -> list[str]:
    return [
        "--track",
        "echo",
        "--tasks",
        str(tasks),
        "--model",
        "openai/echo-model",
        "--trials",
        "2",
        "--max-concurrency",
        "3",
        "--out",
        str(out),
        *extra,
    ]


def assert_each_exactly_once(samples: Path, tasks: int, trials: int) -> None:
    keys = Counter((r["model"], r["task_id"], r["trial"]) for r in read_lines(samples))
    expected = {("openai/echo-model", f"t{i:02d}", t) for i in range(tasks) for t in range(trials)}
    assert set(keys) == expected
    assert set(keys.values()) == {1}, {k: v for k, v in keys.items() if v > 1}


def test_sigkill_mid_run_then_resume_loses_and_duplicates_nothing(
    tmp_path: Path, echo_server: ScriptedServer
):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 10, delay=0.15)
    out = tmp_path / "run"
    process = proctor(run_args(tasks, out), echo_server)
    samples = out / "samples.jsonl"
    wait_for_lines(samples, 4, process)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)
    process.stdout.close()  # type: ignore[union-attr]
    killed_with = len(read_lines(samples))
    assert 4 <= killed_with < 20
    assert json.loads((out / "run.json").read_text())["status"] == "running"  # it never got to say more

    resumed = proctor(["--resume", "--out", str(out)], echo_server)  # config comes from run.json
    output, _ = resumed.communicate(timeout=60)
    assert resumed.returncode == 0, output
    assert_each_exactly_once(samples, tasks=10, trials=2)
    header = json.loads((out / "run.json").read_text())
    assert header["status"] == "finished"
    assert header["sessions"][-1]["already_done"] == killed_with
    assert json.loads((out / "summary.json").read_text())["finished_samples"] == 20


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_exits_130_keeps_finished_samples_and_writes_summary(
    tmp_path: Path, echo_server: ScriptedServer, signum: signal.Signals
):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 10, delay=0.2)
    out = tmp_path / "run"
    process = proctor(run_args(tasks, out), echo_server)
    samples = out / "samples.jsonl"
    wait_for_lines(samples, 3, process)
    process.send_signal(signum)
    output, _ = process.communicate(timeout=30)
    assert process.returncode == 130, output
    assert f"proctor run --resume --out {out}" in output

    kept = read_lines(samples)
    assert 3 <= len(kept) < 20
    header = json.loads((out / "run.json").read_text())
    assert header["status"] == "interrupted" and header["ended_at"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["finished_samples"] == len(kept) and summary["planned_samples"] == 20
    assert summary["status"] == "interrupted"

    resumed = proctor(run_args(tasks, out, "--resume"), echo_server)
    output, _ = resumed.communicate(timeout=60)
    assert resumed.returncode == 0, output
    assert_each_exactly_once(samples, tasks=10, trials=2)


def test_plain_progress_prints_one_line_per_sample_and_the_report_hint(
    tmp_path: Path, echo_server: ScriptedServer
):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 3, wrong={1})
    out = tmp_path / "run"
    process = proctor(run_args(tasks, out), echo_server)
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 0, output
    sample_lines = [line for line in output.splitlines() if line.startswith("[")]
    assert len(sample_lines) == 6
    assert sample_lines[-1].startswith("[6/6]") and "acc=0.667 (4/6)" in sample_lines[-1]
    assert "Run summary" in output
    assert f"proctor view {out}" in output
