"""`proctor bench sandbox --concurrency`: bad input is one line and exit 2, before any container."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--concurrency", "1,x"], "--concurrency: '1,x' is not a comma-separated list of whole numbers"),
        (["--concurrency", "0,4"], "--concurrency: '0,4': each caller count must be between 1 and 256"),
        (["--concurrency", "4", "--rounds", "0"], "--rounds: 0 must be a whole number between 1 and 100"),
        (
            ["--concurrency", "4", "--max-sandbox-concurrency", "1.5"],
            "--max-sandbox-concurrency: 1.5 must be a whole number between 1 and 256",
        ),
    ],
)
def test_bad_concurrency_flags_are_one_line_and_exit_2(args: list[str], message: str) -> None:
    completed = subprocess.run(
        [sys.executable, "-c", "from proctor.agent.cli import main; main()", "bench", "sandbox", *args],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 2, completed
    assert completed.stderr.strip().splitlines() == [f"proctor: error: {message}"]
