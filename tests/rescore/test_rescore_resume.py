"""A real `proctor rescore` process interrupted mid-way, then resumed: nothing finished is lost,
nothing is graded twice, and the answering model is never called."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tests.rescore.conftest import StoredResearchRun, read_lines
from tests.support.scripted_server import Reply, ScriptedServer, Step

REPO = Path(__file__).resolve().parents[2]


def proctor_rescore(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "test", "PYTHONUNBUFFERED": "1"}
    env.pop("OPENAI_BASE_URL", None)
    return subprocess.Popen(
        [sys.executable, "-c", "from proctor.agent.cli import main; main()", "rescore", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_for_lines(path: Path, count: int, process: subprocess.Popen[str], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, f"rescore exited early: {process.communicate()[0]}"
        if path.exists() and path.read_bytes().count(b"\n") >= count:
            return
        time.sleep(0.02)
    raise AssertionError(f"fewer than {count} records after {timeout} s")


def test_ctrl_c_keeps_every_finished_regrade_and_resume_grades_only_the_rest(
    research_run: StoredResearchRun, tmp_path: Path
) -> None:
    fast = threading.Event()

    def judge(request: dict[str, Any], index: int) -> Step:
        # The first two replies are quick; then the judge stalls until the test lets it go.
        slow = index >= 2 and not fast.is_set()
        return Reply(content="Judged.\nVERDICT: 9", delay_s=30.0 if slow else 0.0)

    out = tmp_path / "again"
    model_calls = research_run.model_server.call_count
    with ScriptedServer(judge) as server:
        common = [str(research_run.directory), "--judge", "openai/j2", "--judge-base-url", server.base_url]
        process = proctor_rescore(*common, "--out", str(out), "--max-concurrency", "2")
        wait_for_lines(out / "samples.jsonl", 2, process)
        # Both workers are now waiting on stalled judge replies.
        deadline = time.monotonic() + 30
        while server.call_count < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=60)
        assert process.returncode == 130, output
        assert shlex.join(["rescore", *common, "--resume", "--out", str(out)]) in output
        kept = read_lines(out / "samples.jsonl")
        assert len(kept) == 2
        assert json.loads((out / "run.json").read_text())["status"] == "interrupted"

        fast.set()
        calls_before_resume = server.call_count
        process = proctor_rescore(*common, "--out", str(out), "--resume")
        output, _ = process.communicate(timeout=120)
        assert process.returncode == 0, output
        # Only the four samples not yet graded were sent to the judge again.
        assert server.call_count - calls_before_resume == 4

    records = read_lines(out / "samples.jsonl")
    keys = Counter((r["model"], r["task_id"], r["trial"]) for r in records)
    assert len(keys) == 6 and set(keys.values()) == {1}, keys
    assert records[:2] == kept, "a finished re-graded sample was rewritten"
    assert {r["outcome"] for r in records} == {"correct"} and all(r["rescore"]["rescored"] for r in records)
    header = json.loads((out / "run.json").read_text())
    assert header["status"] == "finished"
    assert [s["status"] for s in header["sessions"]] == ["interrupted", "finished"]
    assert header["sessions"][1]["already_done"] == 2
    assert research_run.model_server.call_count == model_calls


def test_sigkill_mid_rescore_then_resume_keeps_every_line_on_disk(
    research_run: StoredResearchRun, tmp_path: Path
) -> None:
    fast = threading.Event()

    def judge(request: dict[str, Any], index: int) -> Step:
        return Reply(content="Judged.\nVERDICT: 1", delay_s=0.0 if index < 3 or fast.is_set() else 30.0)

    out = tmp_path / "again"
    with ScriptedServer(judge) as server:
        common = [str(research_run.directory), "--judge", "openai/j3", "--judge-base-url", server.base_url]
        process = proctor_rescore(*common, "--out", str(out), "--max-concurrency", "1")
        wait_for_lines(out / "samples.jsonl", 3, process)
        process.kill()  # no handler runs: what is on disk is all there is
        process.communicate(timeout=60)
        on_disk = read_lines(out / "samples.jsonl")
        assert len(on_disk) == 3
        assert json.loads((out / "run.json").read_text())["status"] == "running"
        fast.set()
        process = proctor_rescore(*common, "--out", str(out), "--resume")
        output, _ = process.communicate(timeout=120)
        assert process.returncode == 0, output
    records = read_lines(out / "samples.jsonl")
    assert records[:3] == on_disk and len(records) == 6
    assert len({(r["task_id"], r["trial"]) for r in records}) == 6
    assert {r["outcome"] for r in records} == {"incorrect"}
    # The re-score ends by saying what moved, per task, over both sessions' records.
    original = read_lines(research_run.directory / "samples.jsonl")
    moved = [r for r in original if r["outcome"] != "incorrect"]
    assert f"outcomes moved: {len(moved)} of 6 sample(s)" in output
    for task in {r["task_id"] for r in moved}:
        assert f"{task}: " in output
