"""Choose and open a backend: docker when an engine answers and the image exists, else local."""

from __future__ import annotations

import logging
from typing import Literal

from sandbox.api import Limits, Sandbox, SandboxUnavailable

log = logging.getLogger(__name__)

BackendName = Literal["auto", "docker", "local"]
BACKENDS: tuple[str, ...] = ("auto", "docker", "local")
LOCAL_WARNING = (
    "sandbox: using the LOCAL backend, which isolates less than docker "
    "(host kernel, host Python and libraries, not the pinned image)"
)


async def open_sandbox(
    backend: BackendName | str = "auto",
    *,
    image: str | None = None,
    pool_size: int = 2,
    default_limits: Limits | None = None,
    max_concurrent_executions: int | None = None,
) -> Sandbox:
    """Open a backend (see :func:`_open_backend`) under the process-wide execution bound.

    ``max_concurrent_executions`` defaults to the CPUs the backend can use (sandbox/slots.py).
    """
    from sandbox.slots import limit_sandbox

    opened = await _open_backend(backend, image=image, pool_size=pool_size, default_limits=default_limits)
    return limit_sandbox(opened, max_concurrent_executions)


async def _open_backend(
    backend: BackendName | str = "auto",
    *,
    image: str | None = None,
    pool_size: int = 2,
    default_limits: Limits | None = None,
) -> Sandbox:
    """Open a sandbox. ``"auto"`` falls back to ``"local"`` with a warning when docker can't serve.

    Raises :class:`SandboxUnavailable` when ``"docker"`` is asked for and cannot be used,
    and ``ValueError`` for an unknown backend name.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown sandbox backend {backend!r}: choose one of {', '.join(BACKENDS)}")
    fallback_reason = None
    if backend in ("auto", "docker"):
        try:
            return await _open_docker(image, pool_size, default_limits)
        except SandboxUnavailable as exc:
            if backend == "docker":
                raise
            fallback_reason = f"docker unavailable: {exc}"
            log.warning("%s; %s", LOCAL_WARNING, fallback_reason)
    from sandbox.local_backend import LocalSandbox

    return LocalSandbox(default_limits=default_limits, fallback_reason=fallback_reason)


async def _open_docker(image: str | None, pool_size: int, default_limits: Limits | None) -> Sandbox:
    try:
        from sandbox.docker_backend import open_docker_sandbox
    except ImportError as exc:  # the docker SDK is a hard dependency; this guards broken installs
        raise SandboxUnavailable(f"the docker backend cannot be loaded: {exc}") from exc
    return await open_docker_sandbox(image=image, pool_size=pool_size, default_limits=default_limits)
