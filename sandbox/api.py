"""The one small interface between the agent and every sandbox backend."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

MIB = 1024 * 1024
# A call's memory by default: 4 GiB, no swap (docs/sandbox.md, "Why these defaults").
DEFAULT_MEMORY_BYTES = 4096 * MIB
# Open files per process, soft and hard, on every backend. Set from outside the program (the
# container's ulimit, the local backend's fork before bwrap), never inherited from whoever
# runs Proctor: with the pids limit it bounds the file table a call can take, which the
# kernel's fs.file-max shares among every unprivileged process on the host.
OPEN_FILES = 1024


# How long a container lives (``sandbox.isolation``): ``fresh`` (the default and the protocol's
# promise) gives every call a new container; ``per-sample`` lets one sample's calls reuse a
# container its launcher emptied and proved clean, leaving counters a reset cannot undo (the
# next PID, inode and IPC numbers) readable by that sample's next call (docs/sandbox.md).
FRESH = "fresh"
PER_SAMPLE = "per-sample"
ISOLATIONS: tuple[str, ...] = (FRESH, PER_SAMPLE)
# How the docker backend starts a container (``sandbox.engine_path``): through the engine, or
# with the OCI runtime directly from the spec the engine generated (sandbox/docker/oci_direct.py).
# ``auto`` (the default) is runc-direct wherever it can serve (root, runc, a local engine whose
# spec and image layers it can take) and the engine's path otherwise; describe() records the
# path taken and why (``engine_path``, ``engine_path_reason``).
DOCKER_PATH = "docker"
RUNC_DIRECT = "runc-direct"
AUTO_PATH = "auto"
ENGINE_PATHS: tuple[str, ...] = (DOCKER_PATH, RUNC_DIRECT)
ENGINE_PATH_CHOICES: tuple[str, ...] = (AUTO_PATH, *ENGINE_PATHS)
# The docker backend's container runtimes: runc, or gVisor's runsc (sandbox/docker/runtimes.py). Here,
# not there, so naming them (sandbox/spec.py, the registry) imports no docker SDK.
RUNC = "runc"
RUNSC = "runsc"
RUNTIMES: tuple[str, ...] = (RUNC, RUNSC)


class SandboxError(RuntimeError):
    """A sandbox could not run the program at all (as opposed to the program failing)."""


class SandboxUnavailable(SandboxError):
    """The requested backend cannot be used on this machine (e.g. no Docker engine answers)."""


class InvalidProgram(ValueError):
    """The program itself cannot be handed to an interpreter (a NUL byte, text that is not UTF-8).

    A fault of the code, not of the sandbox: callers report it to whoever wrote the code.
    """


@dataclass(frozen=True)
class Limits:
    """Resource limits for one call. Defaults model "commodity hardware" of 2025: one CPU and
    4 GiB without swap (docs/sandbox.md, "Why these defaults", has the measurements)."""

    memory_bytes: int = DEFAULT_MEMORY_BYTES
    cpus: float = 1.0
    pids: int = 256
    tmpfs_bytes: int = 256 * MIB
    # Cap per stream while it is read, so a flood never fills host memory.
    output_bytes: int = 1 * MIB
    file_size_bytes: int = 256 * MIB

    def replace(self, **changes: Any) -> Limits:
        return dataclasses.replace(self, **changes)


@dataclass
class ExecResult:
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    oom_killed: bool = False
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    duration_s: float = 0.0
    backend: str = ""
    image: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # CPU seconds every process of the call used, as the controller measured it from outside the
    # program (the call's own cgroup; docs/sandbox.md, "A call's CPU time"); None where no such
    # figure exists. Last, so positional construction and records written before it still fit.
    cpu_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ExecResult:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


@runtime_checkable
class Sandbox(Protocol):
    """A backend that runs one program per call, each in a fresh environment."""

    backend: str

    async def exec(
        self,
        code: str | None = None,
        *,
        argv: Sequence[str] | None = None,
        stdin: str | bytes | None = None,
        timeout: float = 30.0,
        limits: Limits | None = None,
    ) -> ExecResult:
        """Run ``code`` with ``python3`` (or run ``argv``) and return what happened.

        Exactly one of ``code`` and ``argv`` is given. Raises :class:`SandboxError`
        only when the sandbox itself failed, never because the program did.
        """
        ...

    def describe(self) -> dict[str, Any]:
        """Backend name, image reference and ID, isolation notes: recorded in every run header."""
        ...

    async def aclose(self) -> None:
        """Release pooled resources; every container this sandbox made is removed."""
        ...
