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

from proctor.sandbox.api import Sandbox
from proctor.sandbox.spec import SandboxSpec

# An opener gets the whole spec and refuses, in one line, what its backend cannot honour.
Opener = Callable[[SandboxSpec], Awaitable[Sandbox]]

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
