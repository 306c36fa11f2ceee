"""One bound on sandbox executions for the whole process, through a real `proctor run`.

A scripted model answers one sample with sixty parallel python calls and another, a moment
later, with one. Each program records its own start and end (the containers share the host's
clock), so the run's records show how many ran at once and where the single call was served.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.runner.conftest import read_lines
from tests.support.scripted_server import Reply, ReportedUsage, ScriptedServer, Step, ToolCallSpec

REPO = Path(__file__).resolve().parents[2]
BOUND = 2
CALL_TIMEOUT_S = 4
MANY = 60
TIMED_PROGRAM = (
    "import json, time\nstarted = time.time()\ntime.sleep(0.2)\nprint(json.dumps([started, time.time()]))\n"
)


def two_samples_model(request: dict[str, Any], index: int) -> Step:
    messages = request["messages"]
    many = "MANY" in messages[0]["content"]
    usage = ReportedUsage(prompt_tokens=1000, completion_tokens=50)
    if not any(m["role"] == "assistant" for m in messages):
        calls = [
            ToolCallSpec("python", json.dumps({"code": TIMED_PROGRAM}), id=f"call_{i}")
            for i in range(MANY if many else 1)
        ]
        # The single call arrives after the sixty are queued: a FIFO would serve it last.
        return Reply(tool_calls=calls, usage=usage, delay_s=0.0 if many else 1.5)
    return Reply(
        tool_calls=[ToolCallSpec("submit_answer", json.dumps({"code": "def answer():\n    return 1\n"}))],
        usage=usage,
    )


def intervals(record: dict[str, Any]) -> list[tuple[float, float]]:
    found = []
    for call in record["tool_calls"]:
        if call["name"] == "python":
            assert call["sandbox"]["timed_out"] is False, call
            started, ended = json.loads(call["result"])
            found.append((started, ended))
    return found


def granted_at(record: dict[str, Any]) -> list[float]:
    """When each python call was given its execution slot (host clock), from its record."""
    slots = [c["sandbox"]["extra"]["slot"] for c in record["tool_calls"] if c["name"] == "python"]
    return [slot["queued_at"] + slot["wait_s"] for slot in slots]


def most_at_once(spans: list[tuple[float, float]]) -> int:
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    return peak


@pytest.mark.docker
def test_sixty_parallel_calls_run_under_the_bound_and_do_not_starve_another_sample(
    sandbox_image: str, tmp_path: Path
) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        "".join(
            json.dumps(
                {"id": name, "question": f"{name}: find 1", "answer_type": "Python int", "answer": "1"}
            )
            + "\n"
            for name in ("MANY", "ONE")
        )
    )
    out = tmp_path / "run"
    # Far less than the sixty calls take together: a wait in the queue must not count.
    config = tmp_path / "run.yaml"
    config.write_text(f"sandbox: {{timeout_s: {CALL_TIMEOUT_S}}}\n")
    with ScriptedServer(two_samples_model) as server:
        completed = subprocess.run(
            [
                *("proctor", "run", str(config), "--track", "frontiermath", "--model", "openai/scripted"),
                *("--backend", "docker", "--tasks", str(tasks), "--out", str(out)),
                *("--max-concurrency", "2", "--max-sandbox-concurrency", str(BOUND)),
            ],
            cwd=REPO,
            env={**os.environ, "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "test"},
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    records = {r["task_id"]: r for r in read_lines(out / "samples.jsonl")}
    many, one = intervals(records["MANY"]), intervals(records["ONE"])
    assert len(many) == MANY and len(one) == 1
    assert most_at_once(many + one) <= BOUND
    # No call timed out (intervals() checks), though the last started long after the first.
    starts = sorted(start for start, _ in many)
    assert starts[-1] - starts[0] > CALL_TIMEOUT_S, starts
    # Fair turns: of the sixty calls still waiting when the single call was queued, at most
    # the bound (plus one for a slot freed in the same instant) were given a slot before it; a
    # FIFO queue would have served every one of them first. Compared by when each call was
    # granted its slot, not when its program started: between the two lie a docker exec and
    # an interpreter's start-up, which under load took from 0.5 s to 8 s per call, far longer
    # than a 0.2 s call, so a single slow start-up made a fair queue look unfair.
    many_granted, (one_granted,) = granted_at(records["MANY"]), granted_at(records["ONE"])
    # The grant times are the limiter's own record: each must precede the program it let run
    # (the containers share the host's clock), so a record that lied about them would show.
    for granted, (started, _) in zip([*many_granted, one_granted], [*many, *one], strict=True):
        assert granted <= started + 1e-3, (granted, started)
    one_call = next(c for c in records["ONE"]["tool_calls"] if c["name"] == "python")
    queued_at = one_call["sandbox"]["extra"]["slot"]["queued_at"]
    assert one_call["sandbox"]["extra"]["slot"]["wait_s"] > 0  # it really waited behind the sixty
    waiting = [granted for granted in many_granted if granted > queued_at]
    jumped_ahead = sum(1 for granted in waiting if granted < one_granted)
    assert len(waiting) >= BOUND + 5, (len(waiting), queued_at, starts[:5])
    assert jumped_ahead <= BOUND + 1, (jumped_ahead, len(waiting), one_granted, queued_at)
    assert records["ONE"]["outcome"] == "correct" and records["MANY"]["outcome"] == "correct"
    header = json.loads((out / "run.json").read_text())
    assert header["sandbox"]["max_concurrent_executions"] == BOUND
