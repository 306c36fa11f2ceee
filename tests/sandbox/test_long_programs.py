"""Programs too long for a command line (issue: over about 2 MB, execve failed with E2BIG and
the call ended with exit 127). The code now travels on a descriptor the supervisor hands the
program (sandbox/program.py); beyond MAX_CODE_BYTES it is refused on the host before anything
runs. Every case runs on docker (runc), docker under gVisor (runsc) and local."""

from __future__ import annotations

import pytest

from proctor.sandbox import InvalidProgram, Sandbox
from proctor.sandbox.program import MAX_CODE_BYTES

pytestmark = pytest.mark.asyncio(loop_scope="session")


def long_program(megabytes: int, stdin_echo: bool = False) -> str:
    body = "import sys\nx = '" + "ab" * (megabytes << 19) + "'\n"
    body += "print(len(x), x[-3:], __name__, sys.argv)\n"
    if stdin_echo:
        body += "print(sys.stdin.read())\n"
    return body


@pytest.mark.slow
@pytest.mark.parametrize("megabytes", [3, 20])
async def test_a_program_of_several_megabytes_runs_whole(sandbox: Sandbox, megabytes: int) -> None:
    # stdin follows the code on the same connection (docker): it must still arrive intact.
    result = await sandbox.exec(long_program(megabytes, True), stdin="after the code", timeout=120)
    assert (result.exit_code, result.stderr) == (0, ""), result
    assert result.stdout == f"{megabytes << 20} bab __main__ ['-c']\nafter the code\n", result


@pytest.mark.slow
async def test_a_program_over_the_bound_is_refused_before_it_runs(sandbox: Sandbox) -> None:
    code = "#" * MAX_CODE_BYTES + "\n"
    with pytest.raises(InvalidProgram) as refused:
        await sandbox.exec(code, timeout=30)
    assert str(refused.value) == (
        f"the code is {MAX_CODE_BYTES + 1:,} bytes; the sandbox accepts at most {MAX_CODE_BYTES:,} bytes"
    )
    # Nothing ran and nothing broke: the next call is served.
    after = await sandbox.exec("print('next')", timeout=30)
    assert (after.exit_code, after.stdout) == (0, "next\n"), after
