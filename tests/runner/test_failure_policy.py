"""Failing fast, never silently: one end-to-end `proctor run` per failure-policy case.

Each case runs the real CLI in a subprocess against scripted servers on 127.0.0.1 (real HTTP,
real openai SDK) and checks the exit code, the one line that explains it, what is on disk
(finished samples kept, nothing written when the run is refused) and, where being fast is the
point, the wall time, with headroom for a loaded 2-core machine.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from proctor.agent.errors import UserError
from proctor.agent.inputs.config import ModelConfig
from proctor.agent.run.runner import execute_run
from tests.runner.conftest import make_config, quiet_progress, read_lines, write_tasks
from tests.support.scripted_server import HttpError, Reply, ScriptedServer, Step

REPO = Path(__file__).resolve().parents[2]
# Distinctive, so a test can prove it never reaches run.json or the output.
SECRET_KEY = "sk-proctor-test-secret-7f3a"
JUDGE_KEY_ENV = "PROCTOR_TEST_JUDGE_KEY"


def proctor(
    *args: str, base_url: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], float]:
    """`proctor ...` from this checkout, the echo test tracks registered; returns (result, seconds)."""
    environment = {
        key: value for key, value in os.environ.items() if key not in ("OPENAI_API_KEY", JUDGE_KEY_ENV)
    }
    environment.update({"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": SECRET_KEY, **(env or {})})
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-c", "from tests.runner.cli_with_test_tracks import main; main()", *args],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return result, time.monotonic() - started


def write_config(tmp_path: Path, tasks: int = 6, **fields: Any) -> Path:
    """An echo-track run: task tNN is answered right by "a"."""
    task_file = tmp_path / "tasks.jsonl"
    task_file.write_text(
        "".join(
            json.dumps({"id": f"t{i:02d}", "question": "say a", "answer": "a"}) + "\n" for i in range(tasks)
        )
    )
    config = {
        "track": "echo",
        "tasks": str(task_file),
        "models": [{"name": "openai/scripted", "max_retries": 0}],
        "max_concurrency": 1,
        "out": str(tmp_path / "run"),
        **fields,
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def error_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.strip()]


def run_json(tmp_path: Path) -> dict[str, Any]:
    return json.loads((tmp_path / "run" / "run.json").read_text())


def unused_loopback_port() -> int:
    """A port on 127.0.0.1 that nobody listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- preflight ----------------------------------------------------------------------------------


def test_a_refused_key_fails_the_preflight_in_seconds_and_nothing_is_written(tmp_path: Path) -> None:
    with ScriptedServer(lambda request, index: HttpError(401, "Incorrect API key provided")) as server:
        result, seconds = proctor("run", str(write_config(tmp_path)), base_url=server.base_url)
        calls = server.call_count
        sent = server.requests[0]
    assert result.returncode == 2, result.stdout + result.stderr
    [line] = error_lines(result)
    assert line.startswith("proctor: error: preflight: model openai/scripted at http://127.0.0.1:")
    assert "HTTP 401" in line and "Check OPENAI_API_KEY" in line and "--no-preflight" in line
    # One request, never retried, and tiny.
    assert calls == 1 and sent.json["max_completion_tokens"] == 16
    assert sent.headers["authorization"] == f"Bearer {SECRET_KEY}"
    assert not (tmp_path / "run").exists()
    assert seconds < 30, seconds  # the process itself; the preflight is a few ms of it


def test_connection_refused_fails_the_preflight_in_seconds(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{unused_loopback_port()}/v1"
    # max_retries 6 as in a default config: the run's backoff before giving up on a dead
    # endpoint is at least 0.5 + 1 + 2 + 4 + 8 + 16 = 31.5 s; the preflight must not pay it.
    config = write_config(tmp_path, models=[{"name": "openai/scripted", "max_retries": 6}])
    result, seconds = proctor("run", str(config), base_url=dead)
    assert result.returncode == 2, result.stdout + result.stderr
    [line] = error_lines(result)
    assert f"preflight: model openai/scripted at {dead}" in line and "connection error" in line
    assert not (tmp_path / "run").exists()
    # The whole process, imports included (several seconds on a loaded machine).
    assert seconds < 25, seconds


async def test_the_preflight_itself_gives_up_on_a_refused_connection_well_under_ten_seconds(
    tmp_path: Path,
) -> None:
    dead = f"http://127.0.0.1:{unused_loopback_port()}/v1"
    config = make_config(
        write_tasks(tmp_path / "tasks.jsonl", 2),
        tmp_path / "run",
        dead,
        models=[ModelConfig(name="openai/scripted", base_url=dead, max_retries=6)],
    )
    started = time.monotonic()
    with pytest.raises(UserError, match=r"preflight: model openai/scripted .* connection error"):
        await execute_run(config, progress=quiet_progress(), handle_signals=False, preflight=True)
    assert time.monotonic() - started < 10
    assert not (tmp_path / "run").exists()


# -- stopping during the run --------------------------------------------------------------------


def _fine_then(failure: HttpError, good_calls: int) -> Any:
    def script(request: dict[str, Any], index: int) -> Step:
        return Reply(content="a") if index < good_calls else failure

    return script


def test_a_key_revoked_mid_run_stops_it_at_once_and_keeps_the_finished_samples(tmp_path: Path) -> None:
    # Call 0 is the preflight, calls 1-2 two samples; then the key stops working.
    script = _fine_then(HttpError(401, "key revoked"), good_calls=3)
    with ScriptedServer(script) as server:
        result, seconds = proctor("run", str(write_config(tmp_path, tasks=6)), base_url=server.base_url)
        calls = server.call_count
    assert result.returncode == 4, result.stdout + result.stderr
    assert calls == 4  # the refused sample's one call; no sample started after it
    records = read_lines(tmp_path / "run" / "samples.jsonl")
    assert [r["outcome"] for r in records] == ["correct", "correct", "model_error"]
    assert "HTTP 401" in records[-1]["error"]
    header = run_json(tmp_path)
    assert header["status"] == "stopped: auth" and header["stopped"]["kind"] == "auth"
    assert header["sessions"][-1]["stopped"]["role"] == "model"
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "stopped: auth" and summary["finished_samples"] == 3
    # Said when it happens, and once more at the end with what is kept.
    announced, final = [
        line for line in result.stdout.splitlines() if line.startswith("proctor: stopped: auth")
    ]
    assert "model openai/scripted" in announced and "no further samples start" in announced
    assert "3 of 6 samples finished and are kept" in final and "--resume" in final
    assert seconds < 30, seconds


def test_quota_exhaustion_stops_the_run_and_samples_in_flight_end_as_errors(tmp_path: Path) -> None:
    quota = HttpError(429, "You exceeded your current quota", code="insufficient_quota")
    script = _fine_then(quota, good_calls=3)
    config = write_config(tmp_path, tasks=8, max_concurrency=2)
    with ScriptedServer(script) as server:
        result, _ = proctor("run", str(config), base_url=server.base_url)
        calls = server.call_count
    assert result.returncode == 4, result.stdout + result.stderr
    records = read_lines(tmp_path / "run" / "samples.jsonl")
    outcomes = [r["outcome"] for r in records]
    # Two finished; the one or two samples in flight when the quota ran out are errors; none after.
    assert outcomes.count("correct") == 2 and 3 <= len(records) <= 4
    assert all("insufficient_quota" in r["error"] for r in records if r["outcome"] == "model_error")
    assert calls == len(records) + 1  # plus the preflight: a quota error is never retried
    assert run_json(tmp_path)["status"] == "stopped: quota"
    assert any(line.startswith("proctor: stopped: quota") for line in result.stdout.splitlines())


def test_persistent_500s_are_retried_counted_honestly_and_fail_the_run(tmp_path: Path) -> None:
    # Every call after the preflight fails: each of 2 samples tries 1 + 2 times.
    script = _fine_then(HttpError(500, "upstream exploded"), good_calls=1)
    config = write_config(
        tmp_path, tasks=2, max_concurrency=2, models=[{"name": "openai/scripted", "max_retries": 2}]
    )
    with ScriptedServer(script) as server:
        result, seconds = proctor("run", str(config), base_url=server.base_url)
        calls = server.call_count
    assert result.returncode == 3, result.stdout + result.stderr
    # 1 + 2 x 3: our retries only; the SDK's own (max_retries) would add more.
    assert calls == 7
    retry_lines = [line for line in result.stdout.splitlines() if line.strip() == "retry: HTTP 500"]
    assert len(retry_lines) == 4
    records = read_lines(tmp_path / "run" / "samples.jsonl")
    assert [r["outcome"] for r in records] == ["model_error", "model_error"]
    assert [r["retries"] for r in records] == [2, 2]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["overall"]["model_retries"] == 4 and summary["status"] == "finished"
    assert "model retries 4" in result.stdout
    assert "2 of 2 samples ended in errors (model_error 2)" in result.stdout
    assert seconds < 60, seconds


# -- judges -------------------------------------------------------------------------------------


def _olympiad_config(tmp_path: Path, model_url: str, judge: dict[str, Any] | None) -> Path:
    tasks = tmp_path / "olympiad.jsonl"
    tasks.write_text(
        json.dumps({"id": "o1", "question": "What is the charge of an electron?", "answer": "-e"})
    )
    config = {
        "track": "olympiad",
        "tasks": str(tasks),
        "models": [{"name": "openai/answerer", "base_url": model_url}],
        "judge": judge,
        "trials": 1,
        "out": str(tmp_path / "run"),
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_a_judged_track_without_a_judge_is_refused_before_any_model_call(tmp_path: Path) -> None:
    with ScriptedServer(lambda request, index: Reply(content="FINAL ANSWER: -e")) as server:
        config = _olympiad_config(tmp_path, server.base_url, judge=None)
        result, _ = proctor("run", str(config), base_url=server.base_url)
        calls = server.call_count
    assert result.returncode == 2, result.stdout + result.stderr
    [line] = error_lines(result)
    assert "track 'olympiad' is graded by a judge, but this run has none" in line
    assert calls == 0 and not (tmp_path / "run").exists()


def test_a_judge_whose_key_variable_is_unset_is_refused_with_or_without_preflight(tmp_path: Path) -> None:
    with (
        ScriptedServer(lambda request, index: Reply(content="FINAL ANSWER: -e")) as model_server,
        ScriptedServer(lambda request, index: Reply(content="VERDICT: CORRECT")) as judge_server,
    ):
        judge = {"name": "openai/grader", "base_url": judge_server.base_url, "api_key_env": JUDGE_KEY_ENV}
        config = _olympiad_config(tmp_path, model_server.base_url, judge=judge)
        for flags in ((), ("--no-preflight",)):
            result, _ = proctor("run", str(config), *flags, base_url=model_server.base_url)
            assert result.returncode == 2, result.stdout + result.stderr
            [line] = error_lines(result)
            assert f"judge 'openai/grader': the key variable {JUDGE_KEY_ENV} is not set" in line
        calls = model_server.call_count + judge_server.call_count
    assert calls == 0 and not (tmp_path / "run").exists()


# -- the endpoint a run used --------------------------------------------------------------------


def test_a_resume_in_a_new_shell_talks_to_the_recorded_endpoint_and_another_only_when_named(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, tasks=2)
    # The first endpoint answers the preflight and t00, then rejects every call (t01 is a
    # model_error that --resume runs again).
    first_script = _fine_then(HttpError(400, "bad request"), good_calls=2)
    with ScriptedServer(first_script) as first, ScriptedServer(lambda r, i: Reply(content="a")) as second:
        started, _ = proctor("run", str(config), base_url=first.base_url)
        assert started.returncode == 3, started.stdout + started.stderr
        header = run_json(tmp_path)
        assert header["endpoints"] == [
            {
                "role": "model",
                "label": "openai/scripted",
                "name": "openai/scripted",
                "base_url": first.base_url,
                "api_key_env": "OPENAI_API_KEY",
            }
        ]
        resume = ("run", "--resume", "--out", str(tmp_path / "run"))

        # A new shell whose OPENAI_BASE_URL says elsewhere: the run goes on where it started.
        first_calls = first.call_count
        # (No preflight: the first endpoint now rejects everything, and t01 must reach it.)
        resumed, _ = proctor(*resume, "--no-preflight", base_url=second.base_url)
        assert resumed.returncode == 3, resumed.stdout + resumed.stderr  # t01 failed again, there
        assert second.call_count == 0 and first.call_count == first_calls + 1
        assert "--allow-endpoint-change" not in resumed.stdout + resumed.stderr
        assert run_json(tmp_path)["events"] == []
        before = (tmp_path / "run" / "samples.jsonl").read_text()

        # Naming another URL on purpose is a change of endpoint: refused unless allowed.
        named = ("-M", f"base_url={second.base_url}")
        refused, _ = proctor(*resume, *named, base_url=first.base_url)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        [line] = error_lines(refused)
        assert f"model openai/scripted ran against {first.base_url}" in line
        assert f"now names {second.base_url}" in line and "--allow-endpoint-change" in line
        assert second.call_count == 0 and (tmp_path / "run" / "samples.jsonl").read_text() == before

        allowed, _ = proctor(*resume, *named, "--allow-endpoint-change", base_url=first.base_url)
        assert allowed.returncode == 0, allowed.stdout + allowed.stderr
        assert second.call_count == 2  # the preflight and the one sample to run again
    header = run_json(tmp_path)
    [event] = header["events"]
    assert event["event"] == "endpoint_change"
    assert (event["from"], event["to"], event["label"]) == (
        first.base_url,
        second.base_url,
        "openai/scripted",
    )
    assert header["endpoints"][0]["base_url"] == second.base_url
    # Only the key's variable is recorded, never the key.
    for name in ("run.json", "samples.jsonl", "summary.json"):
        assert SECRET_KEY not in (tmp_path / "run" / name).read_text()


# A refusing endpoint's own message, crafted to forge a line of ours and drive the terminal.
HOSTILE_MESSAGE = "bad key\nproctor: finished: all samples correct\x1b[2J\x1b]0;owned\x07\r"


def test_an_endpoints_message_cannot_add_lines_or_drive_the_terminal(tmp_path: Path) -> None:
    # At the preflight: the error is still one line, the escapes are spelled out.
    with ScriptedServer(lambda request, index: HttpError(401, HOSTILE_MESSAGE)) as server:
        result, _ = proctor("run", str(write_config(tmp_path)), base_url=server.base_url)
    assert result.returncode == 2, result.stdout + result.stderr
    [line] = error_lines(result)
    # (The preflight joins the message's whitespace itself; the escapes it left reached the terminal.)
    # The escape is neutralised, spelled out or blanked, never sent (asserted just below).
    assert "HTTP 401" in line and "bad key proctor: finished" in line
    assert "\\x1b[2J" in line or " [2J" in line
    assert "\x1b" not in result.stderr and "\r" not in result.stderr
    # Mid-run: the stop lines (when it happens and at the end) too.
    script = _fine_then(HttpError(401, HOSTILE_MESSAGE), good_calls=2)
    with ScriptedServer(script) as server:
        result, _ = proctor("run", str(write_config(tmp_path, tasks=3)), base_url=server.base_url)
    assert result.returncode == 4, result.stdout + result.stderr
    assert "\x1b" not in result.stdout + result.stderr
    assert not any(line.startswith("proctor: finished") for line in result.stdout.splitlines())
    stops = [line for line in result.stdout.splitlines() if line.startswith("proctor: stopped: auth")]
    # The newline cannot start a forged line: spelled out or blanked within the one line.
    assert len(stops) == 2
    assert all(
        ("bad key\\nproctor: finished" in line or "bad key proctor: finished" in line) for line in stops
    )
    # The record keeps the endpoint's words, with its controls blanked (agent/model/provider_outcome.py
    # cleans a provider's message before any record holds it).
    recorded = read_lines(tmp_path / "run" / "samples.jsonl")[-1]["error"]
    assert "bad key proctor: finished: all samples correct" in recorded and "\x1b" not in recorded
