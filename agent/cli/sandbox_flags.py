"""The flags that open a sandbox, laid over one :class:`SandboxSpec`.

A command's sandbox flags are named after the spec's options (``--engine-path`` sets
``engine_path``), so a command gathers the ones the user gave from its own arguments and lays
them over a base spec (the defaults, or a run config's) in one ``dataclasses.replace``: no layer
passes the options on one by one, so none can be dropped on the way (issue #37).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from proctor.agent.errors import UserError
from proctor.sandbox import SandboxSpec, docker_only_problem, option_choices

SPEC_OPTION_NAMES = tuple(option.name for option in dataclasses.fields(SandboxSpec))
# Naming a runtime or an engine socket at all asks for docker's containers, even the default
# runtime's: a local or ray sandbox refuses either flag rather than ignore it.
_NAMED_ONLY_FOR_DOCKER = frozenset({"runtime", "docker_host"})
_TAKES_DOCKER_OPTIONS = ("auto", "docker")
_RAY = "ray"


def flag_of(option: str) -> str:
    """The command-line flag that sets ``option``: ``engine_path`` is ``--engine-path``."""
    return "--" + option.replace("_", "-")


def given_sandbox_flags(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The spec options among a command's ``arguments`` (its ``locals()`` on entry) that the
    user gave; None and an unset switch (False) mean "not given"."""
    return {
        name: value
        for name, value in arguments.items()
        if name in SPEC_OPTION_NAMES and value is not None and value is not False
    }


def spec_with_flags(base: SandboxSpec, given: Mapping[str, Any]) -> SandboxSpec:
    """``base`` with every flag in ``given`` laid over it, or a one-line :class:`UserError`
    naming the flag: a name the sandbox does not know, an option of docker's given to another
    backend, a ray option given to another backend."""
    choices = option_choices()
    for name, value in given.items():
        if name in choices and value not in choices[name]:
            raise UserError(f"{flag_of(name)}: {value!r} is not one of {', '.join(choices[name])}")
    backend = str(given.get("backend", base.backend))
    for name, value in given.items():
        if name == "backend":
            continue
        if backend not in _TAKES_DOCKER_OPTIONS and (
            name in _NAMED_ONLY_FOR_DOCKER or SandboxSpec(**{name: value}).chooses_docker_options()
        ):
            raise UserError(f"{flag_of(name)}: applies to the docker backend only")
        if backend != _RAY and name.startswith(f"{_RAY}_"):
            raise UserError(f"{flag_of(name)}: applies to the ray backend only")
    try:
        spec = dataclasses.replace(base, **given)
    except (TypeError, ValueError) as exc:
        raise UserError(f"{flag_of('backend')} {backend}: {exc}") from None
    # What the base (a run config) asked of docker, now opened on another backend.
    problem = docker_only_problem(spec)
    if problem:
        raise UserError(f"{flag_of('backend')} {backend}: {problem}")
    return spec


def refuse_sandbox_flags(
    flag: str, given: Mapping[str, Any], *, allowed: frozenset[str] = frozenset()
) -> None:
    """One line when ``flag`` (a sandbox Proctor does not open) meets a flag that opens one."""
    for name, value in given.items():
        if name not in allowed and value != "auto":
            raise UserError(f"{flag}: cannot be combined with {flag_of(name)}")
