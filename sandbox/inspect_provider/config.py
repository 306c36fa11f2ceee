"""The provider's configuration: ``sandbox=("proctor", "proctor.yaml")``, a mapping, or nothing.

Everything a Proctor run's ``sandbox`` section says about a container (image, memory, cpus, pids,
tmpfs, runtime, docker_host, isolation, pool_size, max_concurrent_executions) becomes the same
:class:`SandboxSpec` ``proctor run`` opens, so a setting means the same thing in both. Two keys
are the provider's own: ``network`` (Proctor's tool calls never have one) and, for the default
isolation, ``per-sample`` means one container for the sample's whole life (files persist
between calls, as Inspect's bash and python tools assume) rather than run's reset-and-reuse.

A file may hold the keys at its top level or be a whole Proctor run config, whose ``sandbox``
section is read. A bad file or field is one line naming the file and the field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict

from proctor.sandbox.api import (
    AUTO_PATH,
    ENGINE_PATH_CHOICES,
    FRESH,
    ISOLATIONS,
    PER_SAMPLE,
    RUNC,
    RUNSC,
    RUNTIMES,
    Limits,
)
from proctor.sandbox.sizes import parse_size
from proctor.sandbox.spec import SandboxSpec

DOCKER_BACKEND = "docker"
# Inspect's tools keep state in the sample's container between calls: that is the default here.
DEFAULT_ISOLATION = PER_SAMPLE
# Sizes in a config: a number of bytes or a human size such as ``512m`` (sandbox/sizes.py).
_SIZE_KEYS = {"memory": "memory_bytes", "tmpfs": "tmpfs_bytes", "file_size": "file_size_bytes"}
_KNOWN_KEYS = (
    "image",
    "runtime",
    "docker_host",
    "isolation",
    "network",
    "memory",
    "cpus",
    "pids",
    "tmpfs",
    "file_size",
    "pool_size",
    "max_concurrent_executions",
    "engine_path",
)
# A run config's sandbox keys that belong to Proctor's agent (timeouts of its own tools, the
# calibration, ray): an Inspect task sets its own, so they are left out when a run config is read.
_RUN_ONLY_KEYS = (
    "timeout_s",
    "answer_timeout_s",
    "verify_timeout_s",
    "tool_output_chars",
    "calibrate",
    "ray_address",
    "ray_allow_unauthenticated",
)
# The backends a run config may name for the provider to read it: containers on an engine.
_DOCKER_BACKENDS = ("auto", DOCKER_BACKEND)


class ProctorSandboxConfig(BaseModel):
    """The config object form: ``sandbox=("proctor", ProctorSandboxConfig(memory="2g"))``.
    Unset fields take the file form's defaults; values are checked as a file's are."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    image: str | None = None
    runtime: str | None = None
    docker_host: str | None = None
    isolation: str | None = None
    network: bool | None = None
    memory: str | int | None = None
    cpus: float | None = None
    pids: int | None = None
    tmpfs: str | int | None = None
    file_size: str | int | None = None
    pool_size: int | None = None
    max_concurrent_executions: int | None = None
    engine_path: str | None = None


class ProviderConfigError(ValueError):
    """A configuration the provider cannot honour; its message is one line naming where."""


@dataclass(frozen=True)
class ProviderConfig:
    """What one ``sandbox=("proctor", ...)`` asks for: the spec, plus the network switch."""

    spec: SandboxSpec
    # A network of the engine's default bridge, only when the config says ``network: true``.
    network: bool = False
    # Where the config came from, for error messages and describe(): a path or "mapping".
    source: str = "defaults"

    @property
    def isolation(self) -> str:
        return self.spec.isolation

    @property
    def limits(self) -> Limits:
        return self.spec.default_limits or Limits()

    def key(self) -> tuple[Any, ...]:
        """Equal for configs that open the same sandbox (task-wide sharing under ``fresh``)."""
        return (self.spec, self.network)


def load_config(config: object) -> ProviderConfig:
    """A :class:`ProviderConfig` from what Inspect passes: None, a path, a mapping, or a model
    with ``model_dump()`` (a pydantic config object). ``ProviderConfigError`` in one line."""
    if config is None:
        return config_from_mapping({}, "defaults")
    if isinstance(config, str | Path):
        return _from_file(Path(config))
    if isinstance(config, BaseModel):
        config = config.model_dump(exclude_none=True)
    if isinstance(config, Mapping):
        return config_from_mapping(config, "config")
    kind = type(config).__name__
    raise ProviderConfigError(f"proctor sandbox config: {kind} is not a file name or mapping")


def _from_file(path: Path) -> ProviderConfig:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ProviderConfigError(f"{path}: cannot read the proctor sandbox config ({reason})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise ProviderConfigError(f"{where}: {problem}") from None
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ProviderConfigError(f"{path}: want a mapping of sandbox settings, not {type(data).__name__}")
    if "sandbox" in data and isinstance(data["sandbox"], Mapping):
        # A whole Proctor run config: its sandbox section is the part that applies.
        return _from_run_config(data["sandbox"], f"{path}: sandbox")
    return config_from_mapping(data, str(path))


def _from_run_config(section: Mapping[Any, Any], where: str) -> ProviderConfig:
    backend = section.get("backend", "auto")
    if backend not in _DOCKER_BACKENDS:
        raise ProviderConfigError(
            f"{where}: field 'backend': {backend!r}: the Inspect provider runs on docker"
        )
    kept = {key: value for key, value in section.items() if key not in (*_RUN_ONLY_KEYS, "backend")}
    # The sandbox that run would open: its isolation defaults to the run's own, fresh.
    kept.setdefault("isolation", FRESH)
    return config_from_mapping(kept, where)


def config_from_mapping(data: Mapping[Any, Any], where: str) -> ProviderConfig:
    """Check every key and value; ``where`` starts each error (a file name, or ``config``)."""
    unknown = sorted(str(key) for key in data if key not in _KNOWN_KEYS)
    if unknown:
        # A run config's other sandbox keys (timeouts, calibration) mean nothing to Inspect.
        raise ProviderConfigError(
            f"{where}: field {unknown[0]!r} is not a proctor sandbox setting; known: {', '.join(_KNOWN_KEYS)}"
        )
    limits: dict[str, Any] = {}
    for key, limit in _SIZE_KEYS.items():
        if key in data:
            limits[limit] = _size(where, key, data[key])
    if "cpus" in data:
        limits["cpus"] = _positive_number(where, "cpus", data["cpus"])
    if "pids" in data:
        limits["pids"] = _whole(where, "pids", data["pids"], minimum=8)
    isolation = _choice(where, "isolation", data.get("isolation", DEFAULT_ISOLATION), ISOLATIONS)
    runtime = _choice(where, "runtime", data.get("runtime", RUNC), RUNTIMES)
    network = data.get("network", False)
    if not isinstance(network, bool):
        raise ProviderConfigError(f"{where}: field 'network': {network!r} is not true or false")
    if network and runtime == RUNSC:
        # gVisor's engine is registered with --network=none (environment findings: its netstack
        # cannot start in the host's network namespace on this kernel).
        raise ProviderConfigError(f"{where}: field 'network': runtime runsc runs without a network here")
    if network and isolation == FRESH:
        raise ProviderConfigError(
            f"{where}: field 'network': isolation fresh is Proctor's python tool, which has no network"
        )
    spec_fields: dict[str, Any] = {
        "backend": DOCKER_BACKEND,
        "image": _optional_text(where, "image", data.get("image")),
        "docker_host": _optional_text(where, "docker_host", data.get("docker_host")),
        "runtime": runtime,
        "isolation": isolation,
        "engine_path": _choice(where, "engine_path", data.get("engine_path", AUTO_PATH), ENGINE_PATH_CHOICES),
        "default_limits": Limits(**limits),
        # Warm containers serve isolation fresh; a per-sample container is made for its sample.
        "pool_size": _whole(where, "pool_size", data.get("pool_size", SandboxSpec().pool_size)),
    }
    if data.get("max_concurrent_executions") is not None:
        spec_fields["max_concurrent_executions"] = _whole(
            where, "max_concurrent_executions", data["max_concurrent_executions"], minimum=1
        )
    try:
        spec = SandboxSpec(**spec_fields)
    except ValueError as exc:
        raise ProviderConfigError(f"{where}: {exc}") from None
    return ProviderConfig(spec=spec, network=network, source=where)


def _size(where: str, key: str, value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    if isinstance(value, str):
        try:
            return parse_size(value)
        except ValueError as exc:
            raise ProviderConfigError(f"{where}: field {key!r}: {exc}") from None
    raise ProviderConfigError(f"{where}: field {key!r}: {value!r} is not a size such as 512m or 4g")


def _positive_number(where: str, key: str, value: object) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0:
        return float(value)
    raise ProviderConfigError(f"{where}: field {key!r}: {value!r} is not a positive number")


def _whole(where: str, key: str, value: object, minimum: int = 0) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= minimum:
        return value
    raise ProviderConfigError(f"{where}: field {key!r}: {value!r} is not a whole number >= {minimum}")


def _choice(where: str, key: str, value: object, choices: tuple[str, ...]) -> str:
    if isinstance(value, str) and value in choices:
        return value
    raise ProviderConfigError(f"{where}: field {key!r}: {value!r} is not one of {', '.join(choices)}")


def _optional_text(where: str, key: str, value: object) -> str | None:
    if value is None or (isinstance(value, str) and value.strip()):
        return value
    raise ProviderConfigError(f"{where}: field {key!r}: {value!r} is not a non-empty string")
