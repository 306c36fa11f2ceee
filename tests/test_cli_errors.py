"""Every usage mistake is one line on stderr with exit 2, never a traceback or a usage box."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROCTOR = [sys.executable, "-c", "from proctor.agent.cli import main; main()"]


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["sandbox", "exec", "--bogus", "x"], "No such option: --bogus"),
        (["nosuch"], "No such command 'nosuch'"),
        (["run", "--tasks", "/nonexistent/tasks.jsonl", "--model", "openai/x"], "/nonexistent/tasks.jsonl"),
        (["score", "eed"], "REFERENCE"),
    ],
)
def test_usage_errors_are_one_line(argv: list[str], needle: str) -> None:
    done = subprocess.run([*PROCTOR, *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("proctor: error: ")
    assert needle in lines[0]
    assert "Traceback" not in done.stderr


def test_exit_codes_from_commands_survive() -> None:
    # A program that fails inside the sandbox gives its own status, as timeout(1) would.
    done = subprocess.run(
        [*PROCTOR, "sandbox", "exec", "--backend", "local", "--json", "-"],
        input="import sys; sys.exit(3)",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3, done
    assert '"exit_code": 3' in done.stdout
