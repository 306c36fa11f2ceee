"""proctor.sandbox.docker.engine: whether an engine answers, without starting or installing anything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from proctor.sandbox.docker.engine import engine_answers


def test_an_absent_engine_does_not_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/absent.sock")
    assert engine_answers(timeout=2) is False


@pytest.mark.docker
def test_the_running_engine_answers_and_the_module_exits_zero() -> None:
    assert engine_answers() is True
    completed = subprocess.run(
        [sys.executable, "-m", "proctor.sandbox.docker.engine"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stderr == ""  # nothing to install or start
