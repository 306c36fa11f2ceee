"""Sandboxes for the FrontierMath tests: the local backend always, docker where marked.

The local ones skip the import probe (``probe_libraries=False``, seconds of CPU per open): no
test that uses them reads ``describe()["libraries"]``, so the prompt says the libraries are not
listed. tests/runner's runs through `proctor run --backend local` keep the probe, as users get it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from proctor.sandbox import Sandbox, open_sandbox

BACKENDS = ["local", pytest.param("docker", marks=pytest.mark.docker)]


@pytest.fixture
async def local_sandbox() -> AsyncIterator[Sandbox]:
    sandbox = await open_sandbox("local", probe_libraries=False)
    try:
        yield sandbox
    finally:
        await sandbox.aclose()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sandbox() -> AsyncIterator[Sandbox]:
    """One local sandbox for a whole module, for modules whose tests run on the module's event loop
    (``pytest.mark.asyncio(loop_scope="module")``): opening one takes seconds and its calls share no
    state. A module that needs another backend defines its own ``sandbox``, which takes precedence."""
    box = await open_sandbox("local", probe_libraries=False)
    try:
        yield box
    finally:
        await box.aclose()


@pytest.fixture(params=BACKENDS)
async def any_sandbox(request: pytest.FixtureRequest) -> AsyncIterator[Sandbox]:
    sandbox = await open_sandbox(request.param, pool_size=1, probe_libraries=False)
    try:
        yield sandbox
    finally:
        await sandbox.aclose()
