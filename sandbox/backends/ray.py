"""``ray``: calls run on a Ray cluster's nodes, only when asked for by name (sandbox/ray_backend.py)."""

from __future__ import annotations

from proctor.sandbox.api import AUTO_PATH, DOCKER_PATH, FRESH, Sandbox, SandboxUnavailable
from proctor.sandbox.registry import BackendOptions, register
from proctor.sandbox.runtimes import RUNC


@register("ray")
async def open_ray(options: BackendOptions) -> Sandbox:
    if (
        (options.runtime or RUNC) != RUNC
        or options.docker_host
        or options.isolation != FRESH
        or options.engine_path not in (AUTO_PATH, DOCKER_PATH)
    ):
        # Each ray worker uses its own node's engine (proctor sandbox worker --docker-host).
        raise SandboxUnavailable("the ray backend's engines are its workers': no runtime or engine to choose")
    from proctor.sandbox.ray_backend import open_ray_sandbox

    return await open_ray_sandbox(
        address=options.ray_address,
        image=options.image,
        default_limits=options.default_limits,
        allow_unauthenticated=options.ray_allow_unauthenticated,
    )
