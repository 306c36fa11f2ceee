"""Choose and open a backend. ``auto`` means docker, or a one-line error that says how to fix it.

There is no silent downgrade: the local backend (weaker isolation, host libraries) runs only
when it is asked for by name, and then says so: ``describe()["warning"]``, which the
CLI prints and run.json and the summary record.
"""

from __future__ import annotations

from typing import Any

from proctor.sandbox.api import AUTO_PATH, DOCKER_PATH, RUNC, Sandbox, SandboxUnavailable
from proctor.sandbox.registry import opener_for
from proctor.sandbox.spec import AUTO_BACKEND, SandboxSpec, backend_choices

# Backends register themselves by name (sandbox/registry.py, each sandbox/NAME/opener.py); auto is docker.
BACKENDS: tuple[str, ...] = backend_choices()
LOCAL_FIX = "or pass --backend local to accept weaker isolation (host kernel, host Python)"


async def open_sandbox(spec: SandboxSpec | str = AUTO_BACKEND, **options: Any) -> Sandbox:
    """Open the sandbox ``spec`` describes (see :func:`_open_backend`) under the process-wide
    execution bound.

    ``open_sandbox(SandboxSpec(...))`` is the one way in: run, rescore, audit, bench and worker
    build a spec once and pass it unchanged. ``open_sandbox("docker", runtime="runsc")`` is a
    convenience for the Python API (docs/api.md): a backend name and :class:`SandboxSpec`'s
    fields as keywords, which build the spec. The fields (sandbox/spec.py) say what each means:
    ``max_concurrent_executions`` defaults to the CPUs the backend can use (sandbox/slots.py);
    ``runtime``, ``docker_host``, ``isolation`` and ``engine_path`` are the docker backend's,
    and the local and ray backends refuse them (a ray worker uses its own node's engine);
    ``ray_address`` and ``ray_allow_unauthenticated`` are ray's (sandbox/ray/auth.py).
    An unknown name or field is a ``ValueError`` (or ``TypeError``) naming it.
    """
    from proctor.sandbox.slots import limit_sandbox

    if isinstance(spec, SandboxSpec):
        if options:
            raise TypeError("open_sandbox takes a SandboxSpec or a backend name with options, not both")
    else:
        if options.get("runtime", RUNC) is None:
            del options["runtime"]  # None has always meant the default runtime (runc) here
        spec = SandboxSpec(backend=spec, **options)
    opened = await _open_backend(spec)
    return limit_sandbox(opened, spec.max_concurrent_executions)


async def _open_backend(spec: SandboxSpec) -> Sandbox:
    """Open a sandbox: ``"auto"`` and ``"docker"`` need an answering engine and the image.

    Raises :class:`SandboxUnavailable` (one line, naming the fix) when the chosen backend
    cannot be used. Never falls back. ``probe_libraries=False`` skips the local backend's
    import probe (seconds: galois compiles with numba) for callers that never read
    ``describe()["libraries"]``, e.g. one-off execs.
    """
    if (
        spec.backend != AUTO_BACKEND
        or spec.runtime != RUNC
        or spec.docker_host
        or spec.engine_path
        not in (
            AUTO_PATH,
            DOCKER_PATH,
        )
    ):
        # Asked for by name: no fall back to another engine, runtime or backend, even from auto.
        return await opener_for("docker" if spec.backend == AUTO_BACKEND else spec.backend)(spec)
    try:
        return await opener_for("docker")(spec)
    except SandboxUnavailable as exc:
        raise SandboxUnavailable(auto_failure_message(str(exc))) from None


def auto_failure_message(reason: str) -> str:
    """One line: why docker cannot serve and its own fix (``reason`` says it: start the engine,
    or build the image, never both), then the other way out (choose local)."""
    return f"backend auto needs docker and its image: {reason}; {LOCAL_FIX}"
