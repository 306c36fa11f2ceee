"""Each call's CPU time as the controller measures it from outside the program (ExecResult.cpu_s):
the call's own cgroup, on both docker engine paths and the local backend.

On the docker path a fresh container's group can be gone before the controller reads it (the
launcher exits right after its report; docs/sandbox.md, "A call's CPU time"): such a call has no
figure, never a made-up one, so each case takes the first of a few calls that has one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from proctor.sandbox import ExecResult, Sandbox, open_sandbox
from proctor.sandbox.docker.backend import DockerSandbox
from proctor.sandbox.slots import LimitedSandbox, execution_caller
from tests.sandbox.conftest import TEST_LIMITS

pytestmark = pytest.mark.asyncio(loop_scope="module")

BUSY = "print(sum(range(10**7)))"
QUIET = "print(1)"
SLEEP = "import time; time.sleep(1)"
_TRIES = 5


@pytest_asyncio.fixture(
    scope="module",
    loop_scope="module",
    params=[
        pytest.param(("docker", "docker", "fresh"), marks=pytest.mark.docker, id="docker"),
        pytest.param(("docker", "runc-direct", "fresh"), marks=pytest.mark.docker, id="docker-runc-direct"),
        pytest.param(("docker", "docker", "per-sample"), marks=pytest.mark.docker, id="docker-per-sample"),
        pytest.param(
            ("docker", "runc-direct", "per-sample"),
            marks=pytest.mark.docker,
            id="docker-runc-direct-per-sample",
        ),
        pytest.param(("local", "docker", "fresh"), id="local"),
    ],
)
async def sandbox(request: pytest.FixtureRequest) -> AsyncIterator[Sandbox]:
    backend, engine_path, isolation = request.param
    image = request.getfixturevalue("sandbox_image") if backend == "docker" else None
    opened = await open_sandbox(
        backend,
        image=image,
        pool_size=1,
        default_limits=TEST_LIMITS,
        probe_libraries=False,
        engine_path=engine_path,
        isolation=isolation,
    )
    try:
        yield opened
    finally:
        await opened.aclose()


async def measured(sandbox: Sandbox, code: str, timeout: float = 30.0) -> ExecResult:
    """The first of a few runs of ``code`` that carries a figure; every run's figure is a
    non-negative number or None."""
    for _ in range(_TRIES):
        result = await sandbox.exec(code, timeout=timeout)
        assert result.cpu_s is None or result.cpu_s >= 0, result
        if result.cpu_s is not None:
            return result
    raise AssertionError(f"none of {_TRIES} runs of {code!r} had a CPU figure")


async def test_busy_work_reports_more_cpu_than_printing_one(sandbox: Sandbox) -> None:
    quiet = await measured(sandbox, QUIET)
    busy = await measured(sandbox, BUSY)
    assert quiet.exit_code == 0 and busy.exit_code == 0
    assert quiet.cpu_s is not None and busy.cpu_s is not None
    # sum(range(10**7)) is some 0.1-0.2 s of one core; print(1) is an interpreter's start.
    assert busy.cpu_s > quiet.cpu_s + 0.05, (quiet.cpu_s, busy.cpu_s)


async def test_sleeping_reports_well_under_its_wall_time(sandbox: Sandbox) -> None:
    slept = await measured(sandbox, SLEEP)
    assert slept.exit_code == 0 and slept.duration_s >= 1.0
    assert slept.cpu_s is not None and slept.cpu_s < 0.25 * slept.duration_s, (slept.cpu_s, slept.duration_s)


async def test_a_call_killed_at_its_deadline_reports_the_cpu_it_used_within_its_quota(
    sandbox: Sandbox,
) -> None:
    spun = await sandbox.exec("while True: pass", timeout=1.5)
    assert spun.timed_out
    # Read before the kill (docker) or from the group that outlives the kill (runc-direct, local).
    assert spun.cpu_s is not None and 0 < spun.cpu_s <= spun.duration_s * TEST_LIMITS.cpus + 0.1, spun


async def test_a_recycled_containers_call_reports_its_own_cpu_not_its_containers_total(
    sandbox: Sandbox,
) -> None:
    pool = sandbox.inner if isinstance(sandbox, LimitedSandbox) else sandbox
    if not isinstance(pool, DockerSandbox) or pool.describe().get("call_isolation") != "per-sample":
        pytest.skip("only a per-sample docker pool reuses a container")
    for _ in range(_TRIES):
        with execution_caller(object()):
            busy = await sandbox.exec(BUSY, timeout=30)
            # Once its reset is done the caller's own container is taken first, not the spare.
            assert await pool.settle()
            quiet = await sandbox.exec(QUIET, timeout=30)
        if busy.cpu_s is not None and quiet.cpu_s is not None:
            break
    assert quiet.extra["container_id"] == busy.extra["container_id"]
    assert quiet.extra["container_calls_before"] == 1
    assert busy.cpu_s is not None and quiet.cpu_s is not None
    # The group's counter runs on across the two calls: only its growth is the second call's.
    assert quiet.cpu_s < busy.cpu_s - 0.05, (busy.cpu_s, quiet.cpu_s)
