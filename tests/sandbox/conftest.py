"""Sandboxes shared by the conformance suite: one per backend per test session (per xdist worker)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from sandbox import Limits, Sandbox, open_sandbox

TEST_LIMITS = Limits(memory_bytes=512 * 1024 * 1024, pids=128, tmpfs_bytes=64 * 1024 * 1024)
_BUILD_LOCK = Path("/tmp/proctor-test-image-build.lock")


@pytest.fixture(scope="session")
def sandbox_image() -> Iterator[str]:
    """The pinned image, built once (idempotent; the lock keeps xdist workers from racing)."""
    from sandbox.image import build_image

    with _BUILD_LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        info = build_image(log=lambda line: print(line, file=sys.stderr))
    yield info.tag


@pytest.fixture(
    scope="session",
    params=[pytest.param("docker", marks=pytest.mark.docker), "local"],
)
def backend_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def sandbox(backend_name: str, request: pytest.FixtureRequest) -> AsyncIterator[Sandbox]:
    image = request.getfixturevalue("sandbox_image") if backend_name == "docker" else None
    # The conformance cases never read describe()["libraries"]: skip the local import probe.
    opened = await open_sandbox(
        backend_name, image=image, pool_size=2, default_limits=TEST_LIMITS, probe_libraries=False
    )
    assert opened.backend == backend_name
    try:
        yield opened
    finally:
        await opened.aclose()


def run_proctor(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["proctor", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )
