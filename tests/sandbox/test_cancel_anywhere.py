"""A call cancelled at any moment of its start ends at once and leaves nothing running.

Ctrl-C reaches a call as a cancellation, and it may come at any point: before the sandbox's
process exists, while its pipes are being connected, or once the program runs. CPython 3.11
never returns from an ``asyncio.create_subprocess_exec`` cancelled while it connects the child's
pipes, and the sandbox it started was left running (the local backend hung this way under CI
load: ``proctor sandbox exec`` ignored Ctrl-C). So each backend is cancelled across a sweep of
moments after the call starts, and at the moment its program is first seen.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from proctor.sandbox import ExecResult, Sandbox
from tests.sandbox.conftest import TEST_LIMITS
from tests.sandbox.test_conformance import host_processes_with

pytestmark = pytest.mark.asyncio(loop_scope="session")

# Seconds after the call starts: before the process exists, while it starts, while it connects.
CANCEL_AFTER_S = (0.0, 0.0005, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2)
# Cancelled the moment the program is seen, this many times (the race that hung is narrow).
AT_FIRST_SIGHT = 4
# A cancelled call waits for its sandbox's removal, nothing longer.
ENDS_WITHIN_S = 30.0

WAYS = [
    pytest.param(("local", None), id="local"),
    pytest.param(("docker", "runc-direct"), id="runc-direct", marks=pytest.mark.docker),
    pytest.param(("docker", "docker"), id="docker", marks=pytest.mark.docker),
]


def _start_sleeper(sandbox: Sandbox, token: str) -> asyncio.Task[ExecResult]:
    return asyncio.create_task(sandbox.exec(f"# {token}\nimport time\ntime.sleep(600)\n", timeout=600))


async def _open(way: tuple[str, str | None], request: pytest.FixtureRequest) -> Sandbox:
    from proctor.sandbox import open_sandbox

    backend, engine_path = way
    if backend == "local":
        return await open_sandbox("local", default_limits=TEST_LIMITS)
    image = request.getfixturevalue("sandbox_image")
    return await open_sandbox(
        "docker", image=image, pool_size=1, default_limits=TEST_LIMITS, engine_path=engine_path
    )


async def _cancel_and_check(token: str, call: asyncio.Task[ExecResult]) -> None:
    call.cancel()
    done, _ = await asyncio.wait([call], timeout=ENDS_WITHIN_S)
    assert done, f"a call cancelled during its start did not end within {ENDS_WITHIN_S} s"
    # Cancelled before anything ran, or finished first: either way nothing of it may remain,
    # now or a moment later (a start that went on unseen would show up then).
    assert host_processes_with(token) == []
    await asyncio.sleep(0.3)
    assert host_processes_with(token) == []


@pytest.mark.parametrize("way", WAYS)
async def test_a_call_cancelled_at_any_moment_of_its_start_ends_and_leaves_nothing(
    way: tuple[str, str | None], request: pytest.FixtureRequest
) -> None:
    sandbox = await _open(way, request)
    try:
        for delay in CANCEL_AFTER_S:
            token = f"cancel-{uuid.uuid4().hex}"
            call = _start_sleeper(sandbox, token)
            await asyncio.sleep(delay)
            await _cancel_and_check(token, call)
        for _ in range(AT_FIRST_SIGHT):
            token = f"cancel-{uuid.uuid4().hex}"
            call = _start_sleeper(sandbox, token)
            deadline = time.monotonic() + 60
            while not host_processes_with(token):
                assert time.monotonic() < deadline, "the program never started"
                await asyncio.sleep(0.001)
            await _cancel_and_check(token, call)
        # The sandbox still serves after all that.
        result = await sandbox.exec("print(6 * 7)", timeout=60)
        assert result.stdout == "42\n", result
    finally:
        await sandbox.aclose()
