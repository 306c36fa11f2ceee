"""A run that is mostly errors is never reported as a success: `--fail-on-error`."""

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
    ],
)
def test_counts_and_fractions(text: str, errors: int, finished: int, breached: bool) -> None:
    assert ErrorPolicy.parse(text).breached(errors, finished) is breached


def test_the_default_fails_a_run_that_is_mostly_errors() -> None:
    assert DEFAULT_ERROR_POLICY.breached(3, 5) and not DEFAULT_ERROR_POLICY.breached(2, 4)
    assert not DEFAULT_ERROR_POLICY.breached(0, 0)


@pytest.mark.parametrize("text", ["0", "-1", "1.5", "nan", "inf", "lots", "150%", ""])
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


def test_a_run_whose_samples_all_failed_exits_3_and_keeps_them(tmp_path: Path) -> None:
    # A rejected request is never retried and, unlike a refused key, does not stop the run:
    # every sample ends as model_error at once (the preflight would catch it before any).
    with ScriptedServer(lambda request, index: HttpError(400, "bad request")) as server:
        result = _run(tmp_path, server.base_url, "--no-preflight")
    assert result.returncode == 3, result.stdout + result.stderr
    assert "3 of 3 samples ended in errors (model_error 3)" in result.stdout
    assert "--resume" in result.stdout
    assert {r["outcome"] for r in read_lines(tmp_path / "run" / "samples.jsonl")} == {"model_error"}


def test_a_clean_run_exits_0_and_a_strict_threshold_can_still_fail_it(tmp_path: Path) -> None:
    with ScriptedServer(lambda request, index: Reply(content="a")) as server:
        assert _run(tmp_path, server.base_url).returncode == 0
    with ScriptedServer(
        lambda request, index: HttpError(400, "bad request") if index == 0 else Reply(content="a")
    ) as server:
        strict = _run(tmp_path / "strict", server.base_url, "--fail-on-error", "1", "--no-preflight")
    assert strict.returncode == 3 and "1 of 3 samples ended in errors" in strict.stdout
