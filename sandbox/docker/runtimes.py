"""Container runtimes (runc, gVisor's runsc) and the Docker engine that serves each.

runc is the default and is served by the engine the environment names (``DOCKER_HOST`` or the
standard socket). runsc is opt-in. Registering it with the main engine would change that
engine's configuration for everyone, so ``.ci/setup-gvisor.sh`` runs it under a second engine
with its own socket, :data:`GVISOR_ENGINE`. Asking for runsc therefore tries the default engine
first (someone may have registered runsc there) and then that socket; an explicit
``docker_host`` is the only engine tried. No engine offering the runtime is one line naming the
fix, never a silent fall back to runc.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from typing import Any

import docker
from docker.errors import DockerException

# The runtime names live in api (naming them needs no docker SDK); re-exported for callers here.
from proctor.sandbox.api import RUNC as RUNC
from proctor.sandbox.api import RUNSC as RUNSC
from proctor.sandbox.api import RUNTIMES as RUNTIMES
from proctor.sandbox.api import Limits, SandboxUnavailable
from proctor.sandbox.docker.seccomp import engine_profile

GVISOR_ENGINE = "unix:///run/proctor-gvisor/docker.sock"
GVISOR_SETUP = "bash .ci/setup-gvisor.sh"
_DEFAULT_ENGINE = "unix:///var/run/docker.sock"
_API_TIMEOUT_S = 60
_MAX_CONNECTIONS = 32

# gVisor's own threads count against the container's pids cgroup: about 55 idle (init
# included) and 5-6 per program process (measured: 98 sleeping processes took 580 host pids).
# The program's process count is bounded inside the sandbox instead, by RLIMIT_NPROC, which
# gVisor's kernel enforces per container (threads count too); the cgroup is sized so that the
# program at its limit never reaches it. Reaching it panics the sentry: exit 2, output lost.
GVISOR_BASE_PIDS = 128
GVISOR_PIDS_PER_TASK = 8


# Each process inside gVisor costs about 4 MiB of the container's memory even when it only
# sleeps (measured: 100 forked python3 children took 400 MiB), against tens of KiB under runc.
# Without a tighter bound a fork bomb would end in an OOM kill of the whole call rather than in
# EAGAIN for the program, so the program gets at most one process per 6 MiB of its memory limit.
GVISOR_BYTES_PER_PROCESS = 6 * 1024 * 1024
# docker-init and the launcher are counted by the pids limit under runc; keep the same budget.
_INFRASTRUCTURE_PROCESSES = 2


def program_process_limit(runtime: str, limits: Limits) -> int | None:
    """RLIMIT_NPROC for the program under ``runtime``; None where the pids cgroup is the bound.

    Under runc RLIMIT_NPROC would count the sandbox uid's processes in every container on the
    host, coupling calls; under runsc gVisor's kernel counts them per container (threads too).
    """
    if runtime != RUNSC:
        return None
    by_pids = limits.pids - _INFRASTRUCTURE_PROCESSES
    by_memory = limits.memory_bytes // GVISOR_BYTES_PER_PROCESS
    return max(1, min(by_pids, by_memory))


def host_pids_limit(runtime: str, limits: Limits) -> int:
    """The container's pids cgroup limit: ``limits.pids`` under runc; under runsc, room for
    gVisor's own threads beside the program at its process limit."""
    nproc = program_process_limit(runtime, limits)
    if nproc is None:
        return limits.pids
    return GVISOR_BASE_PIDS + GVISOR_PIDS_PER_TASK * nproc


def security_options(runtime: str) -> list[str]:
    """Docker ``security_opt`` for a sandbox container under ``runtime``: no-new-privileges and
    Proctor's own seccomp allowlist (sandbox/docker/seccomp_profile.json) in place of the engine's
    default profile, whatever engine version is installed. runsc is registered with
    ``--oci-seccomp``, so gVisor enforces the same profile for the program inside its kernel
    (with its ENOSYS rule turned into allows: that build ignores errnoRet, sandbox/docker/seccomp.py)."""
    return ["no-new-privileges", f"seccomp={engine_profile(errno_honoured=runtime != RUNSC)}"]


def check_runtime_name(runtime: str) -> None:
    if runtime not in RUNTIMES:
        raise ValueError(f"unknown container runtime {runtime!r}: choose one of {', '.join(RUNTIMES)}")


@dataclass
class Engine:
    """A connected engine that offers ``runtime``."""

    client: docker.DockerClient
    url: str
    runtime: str
    runtime_path: str | None

    def runtime_version(self) -> str | None:
        """``runsc --version``'s first line, when the engine runs on this host; else None."""
        return runtime_version(self.runtime, self.runtime_path, self.url)

    def describe(self) -> dict[str, Any]:
        return {"runtime": self.runtime, "engine": self.url, "runtime_version": self.runtime_version()}


def default_engine_url() -> str:
    return os.environ.get("DOCKER_HOST") or _DEFAULT_ENGINE


def connect_engine_for(runtime: str = RUNC, docker_host: str | None = None) -> Engine:
    """The first answering engine offering ``runtime``; :class:`SandboxUnavailable` otherwise."""
    check_runtime_name(runtime)
    # None: the engine the environment names, through docker.from_env (TLS settings included).
    candidates: list[str | None] = [docker_host] if docker_host else [None]
    if runtime == RUNSC and not docker_host and default_engine_url() != GVISOR_ENGINE:
        candidates.append(GVISOR_ENGINE)
    failures = []
    for candidate in candidates:
        url = candidate or default_engine_url()
        try:
            client = _connect(candidate)
        except SandboxUnavailable as exc:
            if runtime == RUNC:
                raise  # the message every command already gives when no engine answers
            # The line names the socket already; the fix for all of them follows the list.
            failures.append(str(exc).removesuffix(f"; {ENGINE_DOWN_FIX}"))
            continue
        runtimes = _engine_runtimes(client)
        if runtime in runtimes:
            path = runtimes[runtime].get("path") if isinstance(runtimes[runtime], dict) else None
            return Engine(client, url, runtime, str(path) if path else None)
        client.close()
        failures.append(f"{url} offers only {', '.join(sorted(runtimes)) or 'no runtime'}")
    fix = "" if docker_host else f"; run `{GVISOR_SETUP}` (as root) or pass --docker-host"
    raise SandboxUnavailable(f"runtime {runtime}: no Docker engine offers it ({'; '.join(failures)}){fix}")


# What to do about an engine that does not answer; the image is a later question (if it is
# missing, the next attempt says so and names `proctor image build`).
ENGINE_DOWN_FIX = "start it, or point DOCKER_HOST or --docker-host at a running one"


def engine_down(url: str | None, exc: BaseException) -> SandboxUnavailable:
    """One line naming the engine socket that was tried and what it said."""
    text = str(exc).strip()
    reason = text.splitlines()[0] if text else type(exc).__name__
    return SandboxUnavailable(
        f"no Docker engine answers at {url or default_engine_url()} ({reason}); {ENGINE_DOWN_FIX}"
    )


def _connect(url: str | None) -> docker.DockerClient:
    try:
        if url is None:
            client = docker.from_env(timeout=_API_TIMEOUT_S, max_pool_size=_MAX_CONNECTIONS)
        else:
            client = docker.DockerClient(base_url=url, timeout=_API_TIMEOUT_S, max_pool_size=_MAX_CONNECTIONS)
        client.ping()
    except DockerException as exc:
        raise engine_down(url, exc) from None
    return client


def _engine_runtimes(client: docker.DockerClient) -> dict[str, Any]:
    try:
        runtimes = client.info().get("Runtimes") or {}
    except DockerException:
        return {}
    return runtimes if isinstance(runtimes, dict) else {}


def runtime_version(runtime: str, path: str | None, engine_url: str) -> str | None:
    """The runtime binary's version line, read on this host (only for an engine on a local socket)."""
    if runtime != RUNSC or not path or not engine_url.startswith("unix://"):
        return None
    try:
        completed = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = completed.stdout.strip().splitlines()
    return lines[0] if completed.returncode == 0 and lines else None


def known_engine_urls() -> list[str]:
    """Every engine Proctor may have put containers on: the default and, if set up, gVisor's."""
    urls = [default_engine_url()]
    if os.path.exists(GVISOR_ENGINE.removeprefix("unix://")) and GVISOR_ENGINE not in urls:
        urls.append(GVISOR_ENGINE)
    return urls
