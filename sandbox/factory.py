"""Choose and open a backend. ``auto`` means docker, or a one-line error that says how to fix it.

There is no silent downgrade: the local backend (weaker isolation, host libraries) runs only
when it is asked for by name, and then says so: ``describe()["warning"]``, which the
CLI prints and run.json and the summary record.
"""

from __future__ import annotations

from proctor.sandbox.api import (
    AUTO_PATH,
    DOCKER_PATH,
    ENGINE_PATH_CHOICES,
    FRESH,
    ISOLATIONS,
    Limits,
    Sandbox,
    SandboxUnavailable,
)
from proctor.sandbox.registry import BackendOptions, backend_names, opener_for
from proctor.sandbox.runtimes import RUNC, check_runtime_name

# Backends register themselves by name (sandbox/registry.py, sandbox/backends/); auto is docker.
BACKENDS: tuple[str, ...] = ("auto", *backend_names())
LOCAL_FIX = "or pass --backend local to accept weaker isolation (host kernel, host Python)"


async def open_sandbox(
    backend: str = "auto",
    *,
    image: str | None = None,
    pool_size: int = 2,
    default_limits: Limits | None = None,
    max_concurrent_executions: int | None = None,
    probe_libraries: bool = True,
    runtime: str | None = None,
    docker_host: str | None = None,
    isolation: str = FRESH,
    engine_path: str = AUTO_PATH,
    ray_address: str | None = None,
    ray_allow_unauthenticated: bool = False,
) -> Sandbox:
    """Open a backend (see :func:`_open_backend`) under the process-wide execution bound.

    ``max_concurrent_executions`` defaults to the CPUs the backend can use (sandbox/slots.py);
    for ray, the calls its cluster's workers take at once.
    ``runtime`` (``runc``, the default, or ``runsc``) and ``docker_host`` choose the container
    runtime and the engine for docker (sandbox/runtimes.py); the local and ray backends refuse
    them (a ray worker uses its own node's engine). ``ray_address`` is only for ray, and so is
    ``ray_allow_unauthenticated``: without it a cluster that serves clients holding no token is
    refused (sandbox/ray_auth.py).
    ``isolation`` (sandbox/api.py ISOLATIONS) is ``fresh`` (a new container for every call) or
    ``per-sample``: the docker pool may reuse a container for the same sample's next call after
    its launcher has emptied and re-checked it. ``engine_path`` (docker only) is ``docker``,
    ``runc-direct`` (start each container with the OCI runtime from the engine's own spec,
    sandbox/oci_direct.py) or ``auto``, the default: runc-direct where it can serve, else docker,
    with the choice and its reason in ``describe()``.
    """
    from proctor.sandbox.slots import limit_sandbox

    opened = await _open_backend(
        backend,
        image=image,
        pool_size=pool_size,
        default_limits=default_limits,
        probe_libraries=probe_libraries,
        runtime=runtime,
        docker_host=docker_host,
        isolation=isolation,
        engine_path=engine_path,
        ray_address=ray_address,
        ray_allow_unauthenticated=ray_allow_unauthenticated,
    )
    return limit_sandbox(opened, max_concurrent_executions)


async def _open_backend(
    backend: str = "auto",
    *,
    image: str | None = None,
    pool_size: int = 2,
    default_limits: Limits | None = None,
    probe_libraries: bool = True,
    runtime: str | None = None,
    docker_host: str | None = None,
    isolation: str = FRESH,
    engine_path: str = AUTO_PATH,
    ray_address: str | None = None,
    ray_allow_unauthenticated: bool = False,
) -> Sandbox:
    """Open a sandbox: ``"auto"`` and ``"docker"`` need an answering engine and the image.

    Raises :class:`SandboxUnavailable` (one line, naming the fix) when the chosen backend
    cannot be used, and ``ValueError`` for an unknown backend name. Never falls back.
    ``probe_libraries=False`` skips the local backend's import probe (seconds: galois compiles
    with numba) for callers that never read ``describe()["libraries"]``, e.g. one-off execs.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown sandbox backend {backend!r}: choose one of {', '.join(BACKENDS)}")
    check_runtime_name(runtime or RUNC)
    if isolation not in ISOLATIONS:
        raise ValueError(f"unknown sandbox isolation {isolation!r}: choose one of {', '.join(ISOLATIONS)}")
    if engine_path not in ENGINE_PATH_CHOICES:
        raise ValueError(
            f"unknown engine path {engine_path!r}: choose one of {', '.join(ENGINE_PATH_CHOICES)}"
        )
    options = BackendOptions(
        image=image,
        pool_size=pool_size,
        default_limits=default_limits,
        probe_libraries=probe_libraries,
        runtime=runtime,
        docker_host=docker_host,
        isolation=isolation,
        engine_path=engine_path,
        ray_address=ray_address,
        ray_allow_unauthenticated=ray_allow_unauthenticated,
    )
    chosen_path = engine_path not in (AUTO_PATH, DOCKER_PATH)
    if backend != "auto" or runtime not in (None, RUNC) or docker_host or chosen_path:
        # Asked for by name: no fall back to another engine, runtime or backend, even from auto.
        return await opener_for("docker" if backend == "auto" else backend)(options)
    try:
        return await opener_for("docker")(options)
    except SandboxUnavailable as exc:
        raise SandboxUnavailable(auto_failure_message(str(exc))) from None


def auto_failure_message(reason: str) -> str:
    """One line: why docker cannot serve and its own fix (``reason`` says it: start the engine,
    or build the image, never both), then the other way out (choose local)."""
    return f"backend auto needs docker and its image: {reason}; {LOCAL_FIX}"
