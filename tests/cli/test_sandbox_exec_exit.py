"""`proctor sandbox exec` exits with the program's status (issue 38, item 3).

Invariant: the command's exit status is the program's own exit status when it ended by itself,
124 when it timed out, 137 when it was killed for memory, and 125 when the sandbox reported no
status a shell could carry; with or without --json. The sandbox is scripted here (its results
are ExecResult values, every family of them); tests/sandbox/test_cli.py proves the same
through a real sandbox, against the host's own exit status as the oracle.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from proctor.agent.cli import sandbox_cmd
from proctor.sandbox import ExecResult
from tests.support.cli import proctor_in_process


@st.composite
def exec_results(draw: st.DrawFn) -> ExecResult:
    timed_out = draw(st.booleans())
    oom_killed = draw(st.booleans())
    exit_code = draw(
        st.one_of(
            st.none(),
            st.integers(0, 255),
            st.sampled_from([-int(s) for s in (signal.SIGKILL, signal.SIGTERM, signal.SIGSEGV)]),
            st.integers(256, 10_000),
        )
    )
    return ExecResult(
        exit_code=None if timed_out else exit_code,
        stdout=draw(st.text(max_size=8)),
        stderr="",
        timed_out=timed_out,
        oom_killed=oom_killed,
        backend="scripted",
    )


def expected_exit(result: ExecResult) -> int:
    """The documented table (docs/sandbox.md, "CLI"), written out case by case."""
    if result.timed_out:
        return 124
    if result.oom_killed:
        return 137
    if result.exit_code is None or result.exit_code > 255:
        return 125
    if result.exit_code < 0:
        return 128 + abs(result.exit_code)
    return result.exit_code


def run_scripted(monkeypatch: pytest.MonkeyPatch, program: Path, result: ExecResult, *flags: str) -> int:
    async def scripted_run_once(*args: object, **kwargs: object) -> ExecResult:
        return result

    monkeypatch.setattr(sandbox_cmd, "_run_once", scripted_run_once)
    completed = proctor_in_process("sandbox", "exec", "--backend", "local", *flags, str(program))
    assert "Traceback" not in completed.stderr
    if flags == ("--json",):
        assert json.loads(completed.stdout) == result.to_dict()
    return completed.returncode


@pytest.fixture
def program(tmp_path: Path) -> Path:
    path = tmp_path / "program.py"
    path.write_text("print(1)\n")
    return path


# Each example runs the command's main() once: 15 drawn results beside the explicit five cover
# every family (40 took 5-50 s of the quick tier).
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(result=exec_results(), as_json=st.booleans())
@example(result=ExecResult(exit_code=7, stdout="", stderr="", backend="scripted"), as_json=False)
@example(result=ExecResult(exit_code=0, stdout="", stderr="", backend="scripted"), as_json=False)
@example(result=ExecResult(None, "", "", timed_out=True, backend="scripted"), as_json=True)
@example(result=ExecResult(137, "", "", oom_killed=True, backend="scripted"), as_json=False)
@example(result=ExecResult(1, "", "", oom_killed=True, backend="scripted"), as_json=False)
def test_the_exit_status_is_the_programs_or_the_documented_code(
    monkeypatch: pytest.MonkeyPatch, program: Path, result: ExecResult, as_json: bool
) -> None:
    flags = ("--json",) if as_json else ()
    assert run_scripted(monkeypatch, program, result, *flags) == expected_exit(result)


def test_a_sandbox_failure_is_125_not_a_programs_1(monkeypatch: pytest.MonkeyPatch, program: Path) -> None:
    from proctor.sandbox import SandboxError

    async def failing_run_once(*args: object, **kwargs: object) -> ExecResult:
        raise SandboxError("the engine went away")

    monkeypatch.setattr(sandbox_cmd, "_run_once", failing_run_once)
    completed = proctor_in_process("sandbox", "exec", "--backend", "local", str(program))
    assert completed.returncode == 125, completed
    assert completed.stderr.strip() == "proctor: error: the sandbox failed: the engine went away"


def test_the_first_line_of_help_says_so() -> None:
    completed = proctor_in_process("sandbox", "exec", "--help")
    assert completed.returncode == 0
    # The first line of the command's description, below the usage line.
    description = [line.strip(" │") for line in completed.stdout.splitlines() if line.strip(" │")]
    first = description[1]
    assert "exit" in first and "124" in first and "137" in first, completed.stdout
