"""``ray``: calls run on a Ray cluster's nodes, only when asked for by name (sandbox/ray/backend.py)."""

from __future__ import annotations

from proctor.sandbox.api import Sandbox, SandboxUnavailable
from proctor.sandbox.registry import register
from proctor.sandbox.spec import SandboxSpec


@register("ray")
async def open_ray(options: SandboxSpec) -> Sandbox:
    if options.chooses_docker_options():
        # Each ray worker uses its own node's engine (proctor sandbox worker --docker-host).
        raise SandboxUnavailable("the ray backend's engines are its workers': no runtime or engine to choose")
    from proctor.sandbox.ray.backend import open_ray_sandbox

    return await open_ray_sandbox(
        address=options.ray_address,
        image=options.image,
        default_limits=options.default_limits,
        allow_unauthenticated=options.ray_allow_unauthenticated,
    )
