"""Sandbox backends by name: each backend adds its opener here, and ``open_sandbox`` looks it up.

A backend is one subpackage of ``proctor.sandbox`` (``sandbox/docker/``, ``sandbox/local/``,
``sandbox/ray/``) whose ``opener`` module decorates its opener with ``@register("name")``.
Adding a backend adds that folder and touches no existing file. Only the ``opener`` modules are
imported to list the names: they are small and import their backend's implementation only when
it is opened, and the packages' ``__init__`` import nothing, so listing costs no docker or ray
import. A subpackage without an ``opener.py`` (``sandbox/bench/``) is no backend.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from pathlib import Path

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


OPENER_MODULE = "opener"
# This module's own folder is proctor.sandbox's, in a checkout (sandbox/) and a wheel alike.
_SANDBOX = Path(__file__).resolve().parent


def backend_packages() -> list[str]:
    """The folders of ``sandbox/`` that hold a backend (an ``opener.py``), by name, sorted.

    Found on disk, not by import: importing every subpackage to ask would load what they
    import (a provider package may pull in a whole framework)."""
    return sorted(
        opener.parent.name
        for opener in _SANDBOX.glob(f"*/{OPENER_MODULE}.py")
        if opener.parent.name.isidentifier()
    )


def _load_backends() -> None:
    for package in backend_packages():
        importlib.import_module(f"proctor.sandbox.{package}.{OPENER_MODULE}")


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
