"""Sandboxes for the FrontierMath tests: the local backend always, docker where marked."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from proctor.sandbox import Sandbox, open_sandbox

BACKENDS = ["local", pytest.param("docker", marks=pytest.mark.docker)]


@pytest.fixture
async def local_sandbox() -> AsyncIterator[Sandbox]:
    sandbox = await open_sandbox("local")
    try:
        yield sandbox
    finally:
        await sandbox.aclose()


@pytest.fixture(params=BACKENDS)
async def any_sandbox(request: pytest.FixtureRequest) -> AsyncIterator[Sandbox]:
    sandbox = await open_sandbox(request.param, pool_size=1)
    try:
        yield sandbox
    finally:
        await sandbox.aclose()
