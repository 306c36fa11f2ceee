"""Sandbox backends by name: each backend adds its opener here, and ``open_sandbox`` looks it up.

A backend is one module in ``proctor.sandbox.backends`` that decorates its opener with
``@register("name")``. Adding a backend adds that module and touches no existing file; the
opener modules are small and import their backend's implementation only when it is opened, so
listing the names costs no docker or ray import.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from proctor.sandbox.api import AUTO_PATH, FRESH, Limits, Sandbox


@dataclass(frozen=True)
class BackendOptions:
    """What ``open_sandbox`` was asked for; each opener refuses what its backend cannot honour."""

    image: str | None = None
    pool_size: int = 2
    default_limits: Limits | None = None
    probe_libraries: bool = True
    runtime: str | None = None
    docker_host: str | None = None
    # sandbox/api.py ISOLATIONS: fresh (a new container per call) or per-sample.
    isolation: str = FRESH
    # sandbox/api.py ENGINE_PATH_CHOICES: auto, docker, or runc-direct (sandbox/oci_direct.py).
    engine_path: str = AUTO_PATH
    ray_address: str | None = None
    # Use a Ray cluster that serves clients holding no token (sandbox/ray_auth.py).
    ray_allow_unauthenticated: bool = False


Opener = Callable[[BackendOptions], Awaitable[Sandbox]]

_OPENERS: dict[str, Opener] = {}


def register(name: str) -> Callable[[Opener], Opener]:
    """Decorator: ``name`` opens with this function. A name is registered once."""

    def add(opener: Opener) -> Opener:
        if name in _OPENERS and _OPENERS[name] is not opener:
            raise ValueError(f"sandbox backend {name!r} is registered twice")
        _OPENERS[name] = opener
        return opener

    return add


def _load_backends() -> None:
    from proctor.sandbox import backends

    for module in pkgutil.iter_modules(backends.__path__, backends.__name__ + "."):
        importlib.import_module(module.name)


def backend_names() -> tuple[str, ...]:
    """Every registered backend's name, sorted."""
    _load_backends()
    return tuple(sorted(_OPENERS))


def opener_for(name: str) -> Opener:
    """The opener registered as ``name``; ``ValueError`` naming the choices when there is none."""
    _load_backends()
    if name not in _OPENERS:
        raise ValueError(f"unknown sandbox backend {name!r}: choose one of {', '.join(backend_names())}")
    return _OPENERS[name]
