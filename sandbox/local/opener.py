"""``local``: bubblewrap on the host (weaker isolation), only when asked for by name."""

from __future__ import annotations

import asyncio
import logging

from proctor.sandbox.api import AUTO_PATH, DOCKER_PATH, FRESH, RUNC, Sandbox, SandboxUnavailable
from proctor.sandbox.registry import register
from proctor.sandbox.spec import SandboxSpec

log = logging.getLogger(__name__)


@register("local")
async def open_local(options: SandboxSpec) -> Sandbox:
    if options.runtime != RUNC or options.docker_host:
        # bubblewrap has no container runtime: never pretend a local call ran under gVisor.
        raise SandboxUnavailable("the local backend has no container runtime or engine to choose")
    if options.engine_path not in (AUTO_PATH, DOCKER_PATH):
        raise SandboxUnavailable(
            f"engine path {options.engine_path} needs the docker backend (backend is local)"
        )
    if options.isolation != FRESH:
        raise SandboxUnavailable(f"isolation {options.isolation} needs the docker backend (backend is local)")
    from proctor.sandbox.docker.image import top_level_pins
    from proctor.sandbox.local.backend import LocalSandbox

    # The constructor probes bubblewrap once (a short blocking run); keep the loop free.
    local = await asyncio.to_thread(LocalSandbox, options.default_limits)
    log.info("%s", local.describe()["warning"])
    # The prompt lists only what really imports here, so it never promises a missing library.
    if options.probe_libraries:
        await local.probe_libraries(sorted(top_level_pins()))
    return local
