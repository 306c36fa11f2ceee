"""Kill a run at random moments, many times over, then resume it to the end.

Each session is a forked copy of this test process (everything already imported, so a session
costs the run's own time, not Python's start-up) running the real runner, store and openai-SDK
client against a scripted server on 127.0.0.1, with the runner's own SIGINT/SIGTERM handling.
It is killed after a random delay with SIGKILL, SIGINT or SIGTERM (a seeded draw, so a failure
replays). After every kill ``samples.jsonl`` must still read (a torn last line is allowed, it is
what resume cuts off), no sample may appear twice, and no finished sample may vanish. In the end
``--resume`` leaves exactly trials x tasks records and a summary equal to a clean run's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

from proctor.agent.results.store import load_samples, sample_key
from proctor.agent.run.runner import execute_run
from tests.runner.conftest import make_config, quiet_progress, write_tasks
from tests.support.scripted_server import ScriptedServer

TASKS = 8
TRIALS = 3
KILLS = 10
SEED = 20261201


def _session(config: Any, error_file: Path) -> None:
    """The child: one `proctor run` session; never returns."""
    code = 0
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        result = asyncio.run(execute_run(config, progress=quiet_progress(), handle_signals=True))
        code = 130 if result.status == "interrupted" else 0
    except KeyboardInterrupt:
        code = 130  # a Ctrl-C before the runner's handler was installed: the CLI's exit 130
    except BaseException:
        error_file.write_text(traceback.format_exc())
        code = 1
    os._exit(code)


def _start(config: Any, error_file: Path) -> int:
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        _session(config, error_file)
    return pid


def _wait(pid: int, timeout: float = 60.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    raise AssertionError(f"session {pid} did not end within {timeout}s")


def _comparable(summary: dict[str, Any]) -> dict[str, Any]:
    """What a summary says about the samples, without times (which differ run to run)."""
    overall = summary["overall"]
    return {
        "planned": summary["planned_samples"],
        "finished": summary["finished_samples"],
        "accuracy": overall["accuracy"],
        "outcomes": overall["outcomes"],
        "errors": overall["errors"],
        "tokens": overall["tokens"],
        "pass_at_k": overall.get("pass_at_k"),
        "grid": {
            model: [(row["task_id"], row["trials"]) for row in data["grid"]]
            for model, data in summary["tasks"].items()
        },
    }


def test_random_kills_then_resume_end_with_exactly_a_clean_runs_records(
    tmp_path: Path, echo_server: ScriptedServer
) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", TASKS, wrong={2, 5}, delay=0.03)
    out = tmp_path / "run"
    error_file = tmp_path / "child-error.txt"
    rng = random.Random(SEED)
    kept: dict[tuple[str, str, int], str] = {}
    signals = [signal.SIGKILL, signal.SIGINT, signal.SIGTERM]

    for attempt in range(KILLS):
        config = make_config(
            tasks, out, echo_server.base_url, trials=TRIALS, max_concurrency=4, resume=attempt > 0
        )
        pid = _start(config, error_file)
        # From "still importing the track" to "a few samples in": every stage gets hit.
        time.sleep(rng.uniform(0.0, 0.6))
        signum = rng.choice(signals)
        with contextlib.suppress(ProcessLookupError):  # it may have finished already
            os.kill(pid, signum)
        status = _wait(pid)
        assert not error_file.exists(), f"attempt {attempt} ({signum.name}):\n{error_file.read_text()}"
        if os.WIFEXITED(status):
            assert os.WEXITSTATUS(status) in (0, 130), (attempt, signum.name, status)

        samples = out / "samples.jsonl"
        if not samples.exists():
            continue
        loaded = load_samples(samples)
        assert loaded.duplicates == []
        raw_keys = Counter(
            (r["model"], r["task_id"], r["trial"])
            for r in (json.loads(line) for line in samples.read_bytes().split(b"\n")[:-1] if line)
        )
        assert set(raw_keys.values()) <= {1}, f"a sample written twice after attempt {attempt}"
        now = {sample_key(r): r.finished_at for r in loaded.records}
        for key, finished_at in kept.items():
            assert now.get(key) == finished_at, f"{key} lost or rewritten after attempt {attempt}"
        kept = now

    final = make_config(tasks, out, echo_server.base_url, trials=TRIALS, max_concurrency=4, resume=True)
    status = _wait(_start(final, error_file))
    assert not error_file.exists(), error_file.read_text()
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    loaded = load_samples(out / "samples.jsonl")
    keys = Counter(sample_key(r) for r in loaded.records)
    assert len(keys) == TASKS * TRIALS and set(keys.values()) == {1}
    assert (out / "samples.jsonl").read_bytes().count(b"\n") == TASKS * TRIALS
    for key, finished_at in kept.items():
        assert {sample_key(r): r.finished_at for r in loaded.records}[key] == finished_at
    header = json.loads((out / "run.json").read_text())
    assert header["status"] == "finished"

    clean_out = tmp_path / "clean"
    clean = make_config(tasks, clean_out, echo_server.base_url, trials=TRIALS, max_concurrency=4)
    assert os.WEXITSTATUS(_wait(_start(clean, error_file))) == 0
    resumed_summary = json.loads((out / "summary.json").read_text())
    clean_summary = json.loads((clean_out / "summary.json").read_text())
    assert _comparable(resumed_summary) == _comparable(clean_summary)
