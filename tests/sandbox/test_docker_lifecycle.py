"""The docker backend's own container handling: cancellation and a warm container lost in the pool.

These open a docker sandbox of their own (not the backend-parametrized ``sandbox`` of the
conformance suite), because what they check is how the docker backend treats its containers,
found through the engine's labels: so the engine path is named (auto would pick runc-direct).
The ray backend runs this same docker backend on every node; tests/ray/test_ray_cluster.py
checks the same two properties through Ray (a cancelled call, a warm container lost on a node).
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from tests.sandbox.conftest import TEST_LIMITS
from tests.sandbox.test_conformance import host_processes_with

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest.mark.docker
async def test_cancelled_call_and_close_leave_no_container(sandbox_image: str) -> None:
    import docker

    from proctor.sandbox import open_sandbox
    from proctor.sandbox.docker import labels

    token = f"cancelled-{uuid.uuid4().hex}"
    opened = await open_sandbox(
        "docker", image=sandbox_image, pool_size=1, default_limits=TEST_LIMITS, engine_path="docker"
    )
    run_filter = {"label": [labels.LABEL_FILTER, f"{labels.RUN_ID}={opened.describe()['run_id']}"]}
    call = asyncio.create_task(opened.exec(f"# {token}\nimport time\ntime.sleep(60)\n", timeout=60))
    assert await asyncio.to_thread(lambda: _appears(token, 30.0)), "the program never started"
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    # Cancellation awaited the removal: the program and its container are gone already.
    assert host_processes_with(token) == []
    await opened.aclose()
    assert docker.from_env().api.containers(all=True, filters=run_filter) == []


def _appears(token: str, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while not host_processes_with(token):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.docker
async def test_a_warm_container_lost_while_waiting_is_replaced(sandbox_image: str) -> None:
    import docker

    from proctor.sandbox import open_sandbox
    from proctor.sandbox.docker import labels
    from proctor.sandbox.docker.containers import remove_container

    opened = await open_sandbox(
        "docker", image=sandbox_image, pool_size=1, default_limits=TEST_LIMITS, engine_path="docker"
    )
    try:
        assert await opened.settle(60)  # type: ignore[attr-defined]
        api = docker.from_env().api
        run_label = f"{labels.RUN_ID}={opened.describe()['run_id']}"
        warm = api.containers(filters={"label": [labels.LABEL_FILTER, run_label]})
        assert len(warm) == 1
        await asyncio.to_thread(remove_container, api, warm[0]["Id"])
        result = await opened.exec("print('still served')", timeout=30)
        assert (result.exit_code, result.stdout) == (0, "still served\n")
    finally:
        await opened.aclose()


@pytest.mark.docker
async def test_every_warm_container_lost_at_once_is_replaced(sandbox_image: str) -> None:
    """An engine restart or `cleanup --all` from elsewhere kills the whole pool, not one container:
    the next call must still be served (the first dead one found drops every dead one)."""
    import docker

    from proctor.sandbox import open_sandbox
    from proctor.sandbox.docker import labels
    from proctor.sandbox.docker.containers import remove_container

    opened = await open_sandbox(
        "docker", image=sandbox_image, pool_size=3, default_limits=TEST_LIMITS, engine_path="docker"
    )
    try:
        assert await opened.settle(60)  # type: ignore[attr-defined]
        api = docker.from_env().api
        run_label = f"{labels.RUN_ID}={opened.describe()['run_id']}"
        warm = api.containers(filters={"label": [labels.LABEL_FILTER, run_label]})
        assert len(warm) == 3
        for container in warm:
            await asyncio.to_thread(remove_container, api, container["Id"])
        result = await opened.exec("print('still served')", timeout=30)
        assert (result.exit_code, result.stdout) == (0, "still served\n")
        assert result.extra["container_id"] not in {c["Id"] for c in warm}
    finally:
        await opened.aclose()


@pytest.mark.docker
async def test_closing_survives_an_engine_that_never_confirms_a_removal(
    sandbox_image: str, caplog: pytest.LogCaptureFixture
) -> None:
    """gVisor's engine on a loaded host once took over a minute to answer a forced removal; the
    client's read timeout then escaped the sandbox's close and failed a finished audit. A
    removal the engine does not confirm is a warning, and what it left is removed later."""
    import docker
    import requests

    from proctor.sandbox import open_sandbox
    from proctor.sandbox.docker import labels
    from proctor.sandbox.docker.containers import remove_container

    opened = await open_sandbox(
        "docker", image=sandbox_image, pool_size=1, default_limits=TEST_LIMITS, engine_path="docker"
    )
    engine_api = opened.api  # type: ignore[attr-defined]
    unanswered: list[str] = []

    def never_confirmed(container_id: str, **_: object) -> None:
        unanswered.append(container_id)
        raise requests.exceptions.ReadTimeout("Read timed out. (read timeout=60)")

    run_filter = {"label": [labels.LABEL_FILTER, f"{labels.RUN_ID}={opened.describe()['run_id']}"]}
    api = docker.from_env().api
    try:
        result = await opened.exec("print('served')", timeout=30)
        assert (result.exit_code, result.stdout) == (0, "served\n")
        engine_api.remove_container = never_confirmed
        await opened.aclose()  # must not raise
        assert unanswered, "close never tried to remove anything"
        left = {summary["Id"] for summary in api.containers(all=True, filters=run_filter)}
        assert set(unanswered) <= left, "the stand-in engine removed nothing, so all must be left"
        warned = " ".join(record.getMessage() for record in caplog.records)
        for container_id in unanswered:
            assert f"could not remove container {container_id[:12]}" in warned, warned
    finally:
        for summary in api.containers(all=True, filters=run_filter):
            remove_container(api, summary["Id"])
