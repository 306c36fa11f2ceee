"""A run holding any error outcome is not reported as a success unless told: `--fail-on-error`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from proctor.agent.errors import UserError
from proctor.agent.run.error_policy import DEFAULT_ERROR_POLICY, ErrorPolicy
from tests.runner.conftest import read_lines
from tests.support.scripted_server import HttpError, Reply, ScriptedServer


@pytest.mark.parametrize(
    ("text", "errors", "finished", "breached"),
    [
        ("1", 1, 100, True),
        ("5", 4, 4, False),
        ("0.2", 2, 10, False),
        ("0.2", 3, 10, True),
        ("20%", 3, 10, True),
        ("0.0", 1, 1000, True),
        ("0.0", 0, 1000, False),
        ("1.0", 1000, 1000, False),
        ("100%", 5, 5, False),
    ],
)
def test_counts_and_fractions(text: str, errors: int, finished: int, breached: bool) -> None:
    assert ErrorPolicy.parse(text).breached(errors, finished) is breached


def test_the_default_fails_a_run_with_any_error_sample() -> None:
    assert DEFAULT_ERROR_POLICY.breached(1, 1000) and DEFAULT_ERROR_POLICY.breached(3, 5)
    assert not DEFAULT_ERROR_POLICY.breached(0, 1000) and not DEFAULT_ERROR_POLICY.breached(0, 0)
    assert DEFAULT_ERROR_POLICY.describe() == "any error sample"


@pytest.mark.parametrize("text", ["0", "-1", "1.5", "nan", "inf", "lots", "150%", "101%", ""])
def test_bad_thresholds_are_one_line_errors(text: str) -> None:
    with pytest.raises(UserError, match="--fail-on-error"):
        ErrorPolicy.parse(text)


def _tasks(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [{"id": f"t{i}", "question": "q", "answer": "a"} for i in range(3)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _run(tmp_path: Path, base_url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "from tests.runner.cli_with_test_tracks import main; main()",
            *("run", "--track", "echo", "--tasks", str(_tasks(tmp_path / "tasks.jsonl"))),
            *("--model", "openai/scripted", "--out", str(tmp_path / "run"), *extra),
        ],
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "test"},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_a_run_whose_samples_all_failed_exits_3_and_keeps_them(tmp_path: Path) -> None:
    # A rejected request is never retried and, unlike a refused key, does not stop the run:
    # every sample ends as model_error at once (the preflight would catch it before any).
    with ScriptedServer(lambda request, index: HttpError(400, "bad request")) as server:
        result = _run(tmp_path, server.base_url, "--no-preflight")
    assert result.returncode == 3, result.stdout + result.stderr
    assert "3 of 3 samples ended in errors (model_error 3)" in result.stdout
    assert "--resume" in result.stdout
    assert {r["outcome"] for r in read_lines(tmp_path / "run" / "samples.jsonl")} == {"model_error"}


@pytest.mark.slow
def test_a_clean_run_exits_0_and_one_error_sample_fails_it_unless_tolerated(tmp_path: Path) -> None:
    with ScriptedServer(lambda request, index: Reply(content="a")) as server:
        assert _run(tmp_path, server.base_url).returncode == 0
    # A wrong answer is a scored failure, not an error: it never fails the run.
    with ScriptedServer(lambda request, index: Reply(content="b")) as server:
        wrong = _run(tmp_path / "wrong", server.base_url)
    assert wrong.returncode == 0, wrong.stdout + wrong.stderr
    assert {r["outcome"] for r in read_lines(tmp_path / "wrong" / "run" / "samples.jsonl")} == {"incorrect"}

    def one_rejected(request: object, index: int) -> HttpError | Reply:
        return HttpError(400, "bad request") if index == 0 else Reply(content="a")

    with ScriptedServer(one_rejected) as server:
        default = _run(tmp_path / "default", server.base_url, "--no-preflight")
    assert default.returncode == 3, default.stdout + default.stderr
    assert "1 of 3 samples ended in errors (model_error 1)" in default.stdout
    assert f"proctor run --resume --out {tmp_path / 'default' / 'run'}" in default.stdout
    for tolerance in ("1.0", "2", "34%"):
        with ScriptedServer(one_rejected) as server:
            relaxed = _run(
                tmp_path / tolerance, server.base_url, "--fail-on-error", tolerance, "--no-preflight"
            )
        assert relaxed.returncode == 0, relaxed.stdout + relaxed.stderr
    with ScriptedServer(one_rejected) as server:
        tight = _run(tmp_path / "tight", server.base_url, "--fail-on-error", "33%", "--no-preflight")
    assert tight.returncode == 3
