"""``docker``: a fresh container per call (runc or gVisor) from a warm pool (sandbox/docker/backend.py)."""

from __future__ import annotations

from proctor.sandbox.api import Sandbox, SandboxUnavailable
from proctor.sandbox.registry import register
from proctor.sandbox.spec import SandboxSpec


@register("docker")
async def open_docker(options: SandboxSpec) -> Sandbox:
    try:
        from proctor.sandbox.docker.backend import open_docker_sandbox
    except ImportError as exc:  # the docker SDK is a hard dependency; this guards broken installs
        raise SandboxUnavailable(f"the docker backend cannot be loaded: {exc}") from exc
    return await open_docker_sandbox(
        image=options.image,
        pool_size=options.pool_size,
        default_limits=options.default_limits,
        runtime=options.runtime,
        docker_host=options.docker_host,
        isolation=options.isolation,
        engine_path=options.engine_path,
    )
