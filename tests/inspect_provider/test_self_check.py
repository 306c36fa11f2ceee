"""Inspect's own portable conformance suite (inspect_ai.util._sandbox.self_check) against the
``proctor`` provider: one sample container per runtime, shared by every check of the module, as
Inspect's own runner shares one per provider. The checks that fail are exactly the ones
docs/inspect.md lists with their reasons (strict xfail: one that starts passing fails too).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from inspect_ai.util import SandboxEnvironment
from inspect_ai.util._sandbox.self_check import *  # noqa: F403 -- the checks are the tests here

from proctor.sandbox.inspect_provider.config import ProctorSandboxConfig
from proctor.sandbox.inspect_provider.provider import ProctorSandboxEnvironment
from tests.inspect_provider.conftest import runsc

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.slow]

# Each with its reason; docs/inspect.md ("Conformance") has the same list.
EXPECTED_FAILURES = {
    # Every command runs as the sample's own non-root uid: user="root" raises
    # SandboxUserUnsupportedError, so the check cannot add a user (the root is read-only too).
    "test_exec_as_user": "non-root by design",
}


@pytest_asyncio.fixture(
    scope="module",
    loop_scope="module",
    params=[pytest.param("runc", marks=pytest.mark.docker), pytest.param("runsc", marks=runsc)],
)
async def provider_env(
    request: pytest.FixtureRequest, sandbox_image: str
) -> AsyncIterator[SandboxEnvironment]:
    config = ProctorSandboxConfig(runtime=request.param, image=sandbox_image)
    environments = await ProctorSandboxEnvironment.sample_init("self-check", config, {})
    try:
        yield environments["default"]
    finally:
        await ProctorSandboxEnvironment.sample_cleanup("self-check", config, environments, False)


@pytest.fixture
def sandbox_env(provider_env: SandboxEnvironment, request: pytest.FixtureRequest) -> SandboxEnvironment:
    reason = EXPECTED_FAILURES.get(request.node.originalname)
    if reason is not None:
        request.node.add_marker(pytest.mark.xfail(reason=reason, strict=True))
    return provider_env
