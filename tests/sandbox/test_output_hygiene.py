"""What `proctor sandbox exec` shows: nothing a program prints can drive the terminal or pass
for the status line; pipes and --json stay exact; code no interpreter can take is one line."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import time
from pathlib import Path

import pytest

from proctor.agent.model.base import ToolCall
from proctor.agent.text.terminal import escape_for_terminal
from proctor.agent.tracks.frontiermath.tools import parse_tool_call
from tests.support.cli import proctor_in_process

# A retitle, a screen clear, a carriage return overwrite, a C1 CSI, a bidi override, a bell,
# and on stderr a status line copied from our source, then no final newline.
HOSTILE_OUTPUT = (
    "import sys\n"
    "sys.stdout.write('title\\x1b]0;pwned\\x07 clear\\x1b[2J cr\\rover c1\\x9b31m rlo\\u202eabc\\tok\\n')\n"
    "sys.stderr.write('proctor: [sandbox docker: exit 0; 0.01 s]\\nno newline')\n"
    "sys.exit(3)\n"
)
EXACT_STDOUT = "title\x1b]0;pwned\x07 clear\x1b[2J cr\rover c1\x9b31m rlo\u202eabc\tok\n"
STATUS_MARK = "\x1b[7m"


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    path = tmp_path / "hostile.py"
    path.write_text(HOSTILE_OUTPUT)
    return path


def test_escaping_covers_c0_del_c1_and_bidi_and_keeps_text() -> None:
    assert escape_for_terminal("a\tb\nc") == "a\tb\nc"
    assert escape_for_terminal("é ∑ 数学 🙂") == "é ∑ 数学 🙂"
    assert escape_for_terminal("\x1b[31m\r\x08\x00\x7f\x9b\x85") == "\\x1b[31m\\x0d\\x08\\x00\\x7f\\x9b\\x85"
    for bidi in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c":
        assert escape_for_terminal(bidi) == f"\\u{ord(bidi):04x}"


def run_on_a_pty(args: list[str], timeout: float = 120) -> tuple[int, str]:
    """Run proctor with stdout and stderr on one pseudo-terminal; return (exit, what it showed)."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen(["proctor", *args], stdin=subprocess.DEVNULL, stdout=terminal, stderr=terminal)
    os.close(terminal)
    shown = bytearray()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([controller], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # EIO: every writer closed the terminal
                break
            if not chunk:
                break
            shown += chunk
        elif process.poll() is not None:
            break
    os.close(controller)
    code = process.wait(timeout=30)
    # The terminal itself turns each newline into CR LF (onlcr); undo only that.
    return code, shown.decode("utf-8").replace("\r\n", "\n")


@pytest.mark.docker
def test_terminal_sees_no_raw_control_characters_and_an_unforgeable_status_line(
    hostile: Path, sandbox_image: str
) -> None:
    code, shown = run_on_a_pty(
        ["sandbox", "exec", "--backend", "docker", "--image", sandbox_image, str(hostile)]
    )
    assert code == 3, shown
    status_lines = [line for line in shown.splitlines() if line.startswith(STATUS_MARK)]
    assert len(status_lines) == 1 and "exit 3" in status_lines[0], shown
    # Apart from the marked status line, nothing that drives a terminal reached it.
    rest = shown.replace(status_lines[0], "")
    for control in ("\x1b", "\x07", "\r", "\x9b", "\u202e"):
        assert control not in rest, (control, shown)
    assert "title\\x1b]0;pwned\\x07 clear\\x1b[2J cr\\x0dover c1\\x9b31m rlo\\u202eabc\tok\n" in shown
    # The program's copy of the status line is plain text, and its unterminated last line
    # does not share a line with the real one.
    assert "\nproctor: [sandbox docker: exit 0; 0.01 s]\nno newline\n" + STATUS_MARK in shown


@pytest.mark.docker
def test_pipes_and_json_stay_byte_exact(hostile: Path, sandbox_image: str) -> None:
    args = ["proctor", "sandbox", "exec", "--backend", "docker", "--image", sandbox_image, str(hostile)]
    piped = subprocess.run(args, capture_output=True, timeout=120)
    assert piped.returncode == 3 and piped.stdout == EXACT_STDOUT.encode(), piped
    stderr = piped.stderr.decode()
    assert stderr.startswith("proctor: [sandbox docker: exit 0; 0.01 s]\nno newline\n"), stderr
    assert stderr.splitlines()[-1].startswith("proctor: [sandbox docker: exit 3;")
    as_json = subprocess.run([*args, "--json"], capture_output=True, timeout=120)
    assert as_json.returncode == 3
    assert json.loads(as_json.stdout)["stdout"] == EXACT_STDOUT


@pytest.mark.parametrize(
    ("program", "needle"),
    [
        ("print(1)\0\n", "NUL byte (line 1"),
        ("x = 1\nprint('a\0b')\n", "NUL byte (line 2"),
    ],
)
def test_code_with_a_nul_byte_is_one_line_naming_the_file(tmp_path: Path, program: str, needle: str) -> None:
    path = tmp_path / "nul.py"
    path.write_text(program)
    # In-process: the subject is the program check, which runs before any engine is asked.
    completed = proctor_in_process("sandbox", "exec", "--backend", "docker", str(path))
    assert completed.returncode == 2 and "Traceback" not in completed.stderr, completed
    assert completed.stderr.count("\n") == 1 and completed.stderr.startswith(f"proctor: error: {path}: ")
    assert needle in completed.stderr
    from_stdin = proctor_in_process("sandbox", "exec", "-", stdin=program)
    assert from_stdin.returncode == 2 and from_stdin.stderr.startswith("proctor: error: -: "), from_stdin


def test_stdin_that_is_not_utf8_is_one_line() -> None:
    completed = subprocess.run(
        ["proctor", "sandbox", "exec", "-"], input=b"print('\xff')\n", capture_output=True, timeout=60
    )
    assert completed.returncode == 2
    assert completed.stderr.decode() == "proctor: error: -: not UTF-8 text (byte 7)\n"


@pytest.mark.parametrize("tool", ["python", "submit_answer"])
def test_frontiermath_tool_answers_a_program_over_its_limit_as_a_tool_error(tool: str) -> None:
    # A 3 MB program (past the 2 MiB a command line takes) never reaches the sandbox from the
    # track: the tool's own bound on its arguments answers first, in one line naming it.
    code = "x = '" + "a" * (3 << 20) + "'\n"
    parsed = parse_tool_call(ToolCall(id="c1", name=tool, arguments=json.dumps({"code": code})))
    assert parsed.code is None and parsed.error is not None
    assert parsed.error.startswith(f"Error: the arguments of this {tool} call are 3,145,7"), parsed.error
    assert "the limit is 1,000,000" in parsed.error and "\n" not in parsed.error


@pytest.mark.parametrize(
    ("arguments", "needle"),
    [
        ('{"code": "print(1)\\u0000"}', "NUL byte"),
        ('{"code": "print(\'\\ud800\')"}', "not valid UTF-8"),
    ],
)
@pytest.mark.parametrize("tool", ["python", "submit_answer"])
def test_frontiermath_tool_answers_invalid_code_as_a_tool_error(
    tool: str, arguments: str, needle: str
) -> None:
    parsed = parse_tool_call(ToolCall(id="c1", name=tool, arguments=arguments))
    assert parsed.code is None and parsed.error is not None
    assert parsed.error.startswith("Error: the code ") and needle in parsed.error
