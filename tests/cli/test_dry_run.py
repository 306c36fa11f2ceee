"""`proctor run --dry-run` prints the plan and spends nothing.

Checked from outside: the scripted endpoint receives no request, the Docker client points at
a socket that does not exist (any attempt to open a sandbox would fail the command), no run
directory appears, and in-process every way to reach a model or a sandbox is booby-trapped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from proctor.agent.cli import commands_registry  # noqa: F401  (registers every command)
from proctor.agent.cli.app import app
from tests.support.cli import proctor_in_process
from tests.support.scripted_server import Reply, ScriptedServer

REPO = Path(__file__).resolve().parents[2]
FM_TASKS = REPO / "configs" / "tasks" / "frontiermath-samples.jsonl"
OLYMPIAD = REPO / "configs" / "examples" / "olympiad-judged.yaml"
PROCTOR = [sys.executable, "-c", "from proctor.agent.cli import main; main()"]


def proctor(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **env}
    return subprocess.run(
        [*PROCTOR, *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=120
    )


def test_dry_run_sends_nothing_opens_no_sandbox_and_writes_nothing(tmp_path: Path) -> None:
    with ScriptedServer([Reply(content="never")]) as server:
        done = proctor(
            [
                "run",
                "--track",
                "frontiermath",
                "--tasks",
                str(FM_TASKS),
                "--model",
                "openai/m",
                "-M",
                f"base_url={server.base_url}",
                "-M",
                "input_price_per_mtok=1",
                "-M",
                "output_price_per_mtok=4",
                "--backend",
                "docker",
                "--trials",
                "2",
                "--token-cap",
                "5000",
                "--force-submit-at",
                "4000",
                "--out",
                "planned",
                "--dry-run",
            ],
            cwd=tmp_path,
            # Any attempt to reach an engine would fail here instead of silently creating a container.
            env={
                "DOCKER_HOST": f"unix://{tmp_path}/no-such-docker.sock",
                "OPENAI_API_KEY": "sk-secret-value",
            },
        )
        assert done.returncode == 0, done.stderr
        assert server.call_count == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "a dry run wrote into the working directory"
    out = done.stdout
    assert "samples      28 = 1 model(s) x 14 task(s) x 2" in out
    assert "140,000: 28 samples x token cap 5,000" in out
    assert "at most $0.56" in out  # 140,000 tokens at the higher price, $4 per million
    assert f"-> {server.base_url}" in out and "OPENAI_API_KEY set" in out
    assert "sk-secret-value" not in out + done.stderr
    assert "docker" in out and "not created by --dry-run" in out
    # The default isolation and engine path are shown, not only the opt-ins.
    assert "isolation fresh, engine path auto (runc-direct where it can serve, else docker)" in out


def test_dry_run_of_a_judged_config_names_the_judge_and_reads_the_key_variables(tmp_path: Path) -> None:
    done = proctor(
        [
            "run",
            str(OLYMPIAD),
            "--limit",
            "3-4",
            "--trials",
            "1",
            "-M",
            "max_tokens=1000",
            "-M",
            "base_url=http://127.0.0.1:9/v1",
            "--dry-run",
        ],
        cwd=tmp_path,
        env={"OPENAI_API_KEY": ""},
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "2 of 100 selected" in out and "selection    limit 3-4" in out
    # The judge is OpenAI's reasoning model on OpenAI's endpoint: its reasoning is carried; the
    # models were moved to a self-hosted URL and speak Chat Completions (issue 23, item 2).
    assert "judge        openai/gpt-5 (effort high, api responses (auto: OpenAI reasoning model" in out
    assert "api chat (auto: endpoint is not OpenAI's (host 127.0.0.1))" in out
    assert "OPENAI_API_KEY unset" in out
    assert "samples      4 = 2 model(s) x 2 task(s) x 1" in out
    assert "4,000: 4 samples x max output tokens 1,000" in out
    assert "none (this track runs no code)" in out
    assert list(tmp_path.iterdir()) == []


def test_dry_run_with_a_bad_selection_is_one_line_exit_2(tmp_path: Path) -> None:
    # main() in this process (tests/support/cli.py): only its one line is checked here.
    done = proctor_in_process(
        "run",
        "--tasks",
        str(FM_TASKS),
        "--model",
        "openai/m",
        "--task-id",
        "nope-*",
        "--dry-run",
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"proctor: error: {FM_TASKS}: field 'task_ids': no task id matches 'nope-*'"
    ]


def test_no_model_client_sandbox_or_local_server_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    touched: list[str] = []

    def trap(name: str) -> Any:
        def refuse(*args: Any, **kwargs: Any) -> Any:
            touched.append(name)
            raise AssertionError(f"--dry-run called {name}")

        return refuse

    import proctor.agent.model.factory
    import proctor.agent.model.local_server
    import proctor.agent.results.store
    import proctor.agent.run.run_sandbox

    monkeypatch.setattr(proctor.agent.model.factory, "make_client", trap("make_client"))
    monkeypatch.setattr(proctor.agent.run.run_sandbox, "open_sandbox", trap("open_sandbox"))
    monkeypatch.setattr(proctor.agent.model.local_server, "local_model_server", trap("local_model_server"))
    monkeypatch.setattr(proctor.agent.results.store.RunStore, "write_header", trap("write_header"))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        app,
        ["run", "--tasks", str(FM_TASKS), "--model", "local/gemma3-270m", "--model", "openai/x", "--dry-run"],
    )
    assert result.exit_code == 0, result.output
    assert touched == []
    assert "local llama.cpp server on 127.0.0.1 (started by the run)" in result.output
    assert list(tmp_path.iterdir()) == []


def test_dry_run_with_resume_counts_what_is_done_without_touching_the_run(tmp_path: Path) -> None:
    from proctor.agent.results.records import Outcome, SampleRecord

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    records = [
        SampleRecord(
            run_id="r",
            track="frontiermath",
            task_id=task,
            trial=0,
            model="openai/m",
            outcome=outcome,
            started_at="t",
            finished_at="t",
            duration_s=0.0,
        )
        for task, outcome in (
            ("nt-quadratic-13", Outcome.CORRECT),
            ("comb-subset-sums-7", Outcome.MODEL_ERROR),
        )
    ]
    from proctor.agent.run.config_loader import RunFlags, load_run_config
    from proctor.agent.run.preflight import endpoint_uses
    from proctor.agent.run.run_header import base_header
    from proctor.agent.run.sample_plan import model_labels

    recorded = load_run_config(None, RunFlags(tasks=FM_TASKS, models=["openai/m"], out=run_dir))
    labels = model_labels(recorded.models)
    uses = endpoint_uses(list(zip(labels, recorded.models, strict=True)), recorded.judge)
    header = base_header(recorded, "r", labels, 14, uses)
    (run_dir / "run.json").write_text(json.dumps(header))
    samples = run_dir / "samples.jsonl"
    samples.write_text("".join(r.model_dump_json() + "\n" for r in records) + '{"torn')
    before = samples.read_bytes()
    done = proctor(
        [
            "run",
            "--tasks",
            str(FM_TASKS),
            "--model",
            "openai/m",
            "--resume",
            "--out",
            str(run_dir),
            "--dry-run",
        ],
        cwd=tmp_path,
        env={},
    )
    assert done.returncode == 0, done.stderr
    # The model_error sample runs again on resume, so only one is done.
    assert f"resume       1 already done in {run_dir}; 13 to run" in done.stdout
    assert samples.read_bytes() == before  # the torn line is not repaired by a dry run
    assert sorted(p.name for p in run_dir.iterdir()) == ["run.json", "samples.jsonl"]


def test_the_plan_never_lets_a_task_file_drive_the_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tasks = tmp_path / "tasks.jsonl"
    hostile = "x\x1b]0;pwned\x07\x1b[2J\u202e"
    tasks.write_text(json.dumps({"id": hostile, "question": "q", "answer": "1"}) + "\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        app, ["run", "--track", "olympiad", "--tasks", str(tasks), "--model", "openai/m", "--dry-run"]
    )
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\u202e" not in result.output
    assert "x\\x1b]0;pwned\\x07\\x1b[2J\\u202e" in result.output


def _main_error(argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> str:
    from proctor.agent.cli import main

    monkeypatch.setattr("sys.argv", ["proctor", *argv])
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_dry_run_refuses_what_the_run_would_refuse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from proctor.agent.run.config_loader import RunFlags, load_run_config
    from proctor.agent.run.preflight import endpoint_uses
    from proctor.agent.run.run_header import base_header
    from proctor.agent.run.sample_plan import model_labels

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "samples.jsonl").write_text('{"task_id": "x"}\n')
    base = ["run", "--tasks", str(FM_TASKS), "--model", "openai/m", "--out", str(run_dir), "--dry-run"]
    assert "already holds a run; pass --resume" in _main_error(base, monkeypatch, capsys)
    # A resume whose budget differs from the recorded run's is refused, as the run would be.
    recorded = load_run_config(None, RunFlags(tasks=FM_TASKS, models=["openai/m"], out=run_dir))
    labels = model_labels(recorded.models)
    uses = endpoint_uses(list(zip(labels, recorded.models, strict=True)), recorded.judge)
    header = base_header(recorded, "r", labels, 14, uses)
    (run_dir / "run.json").write_text(json.dumps(header))
    before = sorted((p.name, p.read_bytes()) for p in run_dir.iterdir())
    line = _main_error(
        [*base, "--resume", "--token-cap", "9000", "--force-submit-at", "8000"], monkeypatch, capsys
    )
    assert "cannot resume this run with a different config: budget was" in line
    assert sorted((p.name, p.read_bytes()) for p in run_dir.iterdir()) == before
