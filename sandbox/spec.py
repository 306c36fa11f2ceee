"""``SandboxSpec``: every option a sandbox is opened with, in one value.

It is built once (from a run config and its flags, or by a caller of the Python API), recorded
in run.json (``sandbox_spec``), and passed unchanged to ``open_sandbox`` and on to the backend's
opener. Rescoring reopens the recorded spec, so the runtime a run's owner chose (gVisor, say)
is the runtime its rescore runs answer() under: no layer retypes the options and drops one.

A spec cannot hold an unknown backend, runtime, isolation or engine path: it is checked when it
is made, and a recorded one is read back field by field, naming the field that is wrong.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

# Only api: naming the options (and the registry listing backends) imports no docker SDK.
from proctor.sandbox.api import (
    AUTO_PATH,
    DOCKER_PATH,
    ENGINE_PATH_CHOICES,
    FRESH,
    ISOLATIONS,
    RUNC,
    RUNTIMES,
    Limits,
)

AUTO_BACKEND = "auto"


def backend_choices() -> tuple[str, ...]:
    """``auto`` and every registered backend (sandbox/registry.py): the one list of backends."""
    from proctor.sandbox.registry import backend_names

    return (AUTO_BACKEND, *backend_names())


def option_choices() -> dict[str, tuple[str, ...]]:
    """The names each named option of a spec may take: a config schema lists these, never its own."""
    return {
        "backend": backend_choices(),
        "runtime": RUNTIMES,
        "isolation": ISOLATIONS,
        "engine_path": ENGINE_PATH_CHOICES,
    }


@dataclass(frozen=True)
class SandboxSpec:
    """What to open. The defaults are a fresh-container docker sandbox under runc, or
    ``auto``'s one-line error naming the fix when docker cannot serve (sandbox/factory.py)."""

    # Where model code runs: docker, local (cgroups), ray, or auto (docker when an engine
    # answers, else a one-line error naming the fix); the registry lists the backends.
    backend: str = AUTO_BACKEND
    # Sandbox image; None: the pinned image `proctor image build` makes.
    image: str | None = None
    # Containers kept warm, ready for the next call (docker).
    pool_size: int = field(default=2, metadata={"ge": 0})
    # Limits of a call that names none; None: Limits()'s defaults.
    default_limits: Limits | None = None
    # Sandbox calls running at once in the whole process (queued fairly between samples);
    # None: as many as the CPUs the backend can use (the engine's for docker).
    max_concurrent_executions: int | None = field(default=None, metadata={"ge": 1})
    # The local backend's import probe (seconds); off for one-off execs that never read it.
    probe_libraries: bool = True
    # Container runtime of the docker backend: runc (default) or gVisor's runsc (docs/sandbox.md,
    # "Runtimes"); docker_host names the engine (default: the environment's, or for runsc the
    # engine .ci/setup-gvisor.sh starts when the default one lacks it).
    runtime: str = RUNC
    # The docker engine's socket (unix:///...); None: the environment's (DOCKER_HOST or default).
    docker_host: str | None = None
    # How long a container lives (docs/sandbox.md, "Isolation: fresh or per-sample"): fresh, a
    # new container for every call (the protocol's promise and the default), or per-sample, where
    # one sample's calls reuse a container the launcher emptied and re-checked, leaving counters
    # a reset cannot undo (next PID, inode and IPC numbers) to that sample's next call.
    isolation: str = FRESH
    # How the docker backend starts a container (docs/sandbox.md, "Engine paths"): through the
    # engine (docker), with the OCI runtime directly from the spec the engine generated
    # (runc-direct; needs root and runc on the engine's host), or auto: runc-direct where it can
    # serve, else docker. run.json records the path taken and why (sandbox.engine_path_reason).
    engine_path: str = AUTO_PATH
    # The Ray cluster for backend ray (host:port of its head); None: RAY_ADDRESS or a local one.
    ray_address: str | None = None
    # Use a Ray cluster that serves clients holding no token (sandbox/ray/auth.py): off, so an
    # open cluster is refused in one line; recorded in run.json as sandbox.ray_auth.
    ray_allow_unauthenticated: bool = False

    def __post_init__(self) -> None:
        for name, choices in option_choices().items():
            _check_choice(name, getattr(self, name), choices)
        if isinstance(self.pool_size, bool) or not isinstance(self.pool_size, int) or self.pool_size < 0:
            raise ValueError(f"sandbox pool_size {self.pool_size!r}: want a whole number >= 0")
        bound = self.max_concurrent_executions
        if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int) or bound < 1):
            raise ValueError(
                f"sandbox max_concurrent_executions {bound!r}: want a whole number >= 1, or none"
            )
        if self.default_limits is not None and not isinstance(self.default_limits, Limits):
            raise ValueError("sandbox default_limits: want Limits or none")

    def chooses_docker_options(self) -> bool:
        """Whether anything only the docker backend has was asked for by name."""
        return (
            self.runtime != RUNC
            or self.docker_host is not None
            or self.isolation != FRESH
            or self.engine_path not in (AUTO_PATH, DOCKER_PATH)
        )

    def replace(self, **changes: Any) -> SandboxSpec:
        return dataclasses.replace(self, **changes)

    def record(self) -> dict[str, Any]:
        """JSON for run.json: :meth:`from_record` gives back an equal spec."""
        data = {field.name: getattr(self, field.name) for field in fields(self)}
        limits = self.default_limits
        data["default_limits"] = None if limits is None else dataclasses.asdict(limits)
        return data

    @classmethod
    def from_record(cls, data: object) -> SandboxSpec:
        """A spec from :meth:`record`'s JSON; ``ValueError`` naming the field that is wrong.

        Missing fields take their defaults (a spec recorded before a field existed); unknown
        ones are refused, so a typo never silently opens the default."""
        if not isinstance(data, Mapping):
            raise ValueError("not an object")
        known = {field.name: field for field in fields(cls)}
        unknown = sorted(str(key) for key in data if key not in known)
        if unknown:
            raise ValueError(f"field {unknown[0]!r} is not a sandbox option")
        values: dict[str, Any] = {}
        for name, value in data.items():
            if name == "default_limits":
                value = None if value is None else _limits_from_record(value)
            else:
                _check_json_type(name, value, _FIELD_TYPES[name])
            values[name] = value
        try:
            return cls(**values)
        except (TypeError, ValueError) as exc:
            raise ValueError(str(exc)) from None


def docker_only_problem(spec: SandboxSpec) -> str | None:
    """One line naming the first option that only the docker backend has, when ``spec`` names
    another backend; None when it asks nothing of the kind (or opens docker, or auto)."""
    if spec.backend in (AUTO_BACKEND, "docker"):
        return None
    for option in fields(spec):
        value = getattr(spec, option.name)
        if option.name != "backend" and SandboxSpec(**{option.name: value}).chooses_docker_options():
            return f"{option.name} {value} needs the docker backend (backend is {spec.backend})"
    return None


# What each recorded field may hold (JSON has no tuples or sets; int is not bool here).
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "backend": (str,),
    "image": (str, type(None)),
    "pool_size": (int,),
    "max_concurrent_executions": (int, type(None)),
    "probe_libraries": (bool,),
    "runtime": (str,),
    "docker_host": (str, type(None)),
    "isolation": (str,),
    "engine_path": (str,),
    "ray_address": (str, type(None)),
    "ray_allow_unauthenticated": (bool,),
}


def _check_json_type(name: str, value: object, allowed: tuple[type, ...]) -> None:
    if isinstance(value, bool) and bool not in allowed:
        raise ValueError(f"field {name!r}: {value!r} is not a {allowed[0].__name__}")
    if not isinstance(value, allowed):
        raise ValueError(f"field {name!r}: {value!r} is not a {allowed[0].__name__}")


def _limits_from_record(value: object) -> Limits:
    if not isinstance(value, Mapping):
        raise ValueError("field 'default_limits': not an object")
    known = {field.name: field for field in fields(Limits)}
    values: dict[str, Any] = {}
    for name, item in value.items():
        if name not in known:
            raise ValueError(f"field 'default_limits.{name}' is not a limit")
        number = item if isinstance(item, int | float) and not isinstance(item, bool) else None
        fraction_allowed = name == "cpus"
        if number is None or not (fraction_allowed or isinstance(number, int)):
            raise ValueError(f"field 'default_limits.{name}': {item!r} is not a positive number")
        if not math.isfinite(number) or number <= 0:
            raise ValueError(f"field 'default_limits.{name}': {item!r} is not a positive number")
        values[name] = item
    return Limits(**values)


# The words each refusal starts with: the ones open_sandbox has always used.
_LABELS = {
    "backend": "sandbox backend",
    "runtime": "container runtime",
    "isolation": "sandbox isolation",
    "engine_path": "engine path",
}


def check_option_name(field: str, value: object) -> None:
    """``ValueError`` naming the choices when ``value`` is not one of ``field``'s names."""
    _check_choice(field, value, option_choices()[field])


def _check_choice(field: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"unknown {_LABELS[field]} {value!r}: choose one of {', '.join(choices)}")
