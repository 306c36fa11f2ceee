"""A command's sandbox flags laid over one SandboxSpec (agent/cli/sandbox_flags.py), and the
config section whose options are the spec's own fields (agent/inputs/config.py).

Invariant: a flag the user gave replaces the spec option of its name and nothing else; a flag
the spec's backend cannot honour is refused in one line naming the flag, never dropped. Oracle:
``dataclasses.replace`` of the base spec, and the spec's own checks (``SandboxSpec(...)`` and
``docker_only_problem``) for the config section.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from proctor.agent.cli.sandbox_flags import flag_of, given_sandbox_flags, spec_with_flags
from proctor.agent.errors import UserError
from proctor.agent.inputs.config import SandboxConfig
from proctor.sandbox import (
    Limits,
    Sandbox,
    SandboxSpec,
    SandboxUnavailable,
    docker_only_problem,
    option_choices,
)
from tests.support.cli import proctor_in_process

CHOICES = option_choices()
flags = st.fixed_dictionaries(
    {},
    optional={
        "backend": st.sampled_from(CHOICES["backend"]),
        "runtime": st.sampled_from(CHOICES["runtime"]),
        "isolation": st.sampled_from(CHOICES["isolation"]),
        "engine_path": st.sampled_from(CHOICES["engine_path"]),
        "docker_host": st.sampled_from(["unix:///run/docker-gvisor.sock", "tcp://127.0.0.1:2375"]),
        "image": st.sampled_from(["proctor-sandbox:dev", "registry.example/img@sha256:" + "a" * 64]),
        "ray_address": st.sampled_from(["127.0.0.1:6379", "ray://10.0.0.2:10001"]),
        "ray_allow_unauthenticated": st.just(True),
    },
)


@settings(max_examples=60, deadline=None)
@given(given_flags=flags)
def test_a_flag_replaces_its_option_or_is_refused_in_one_line(given_flags: dict[str, Any]) -> None:
    base = SandboxSpec(pool_size=0, probe_libraries=False, default_limits=Limits(memory_bytes=2**28))
    try:
        spec = spec_with_flags(base, given_flags)
    except UserError as refused:
        message = str(refused)
        assert "\n" not in message
        assert any(message.startswith(flag_of(name)) for name in given_flags)
        return
    # Accepted: exactly the base with the given flags laid over it, and nothing left that the
    # backend cannot honour.
    assert spec == dataclasses.replace(base, **given_flags)
    assert docker_only_problem(spec) is None


@settings(max_examples=30, deadline=None)
@given(given_flags=flags)
def test_every_docker_flag_is_honoured_by_docker(given_flags: dict[str, Any]) -> None:
    # The honest corpus: on docker (or auto), every runtime, isolation, engine path and engine.
    docker_flags = {name: value for name, value in given_flags.items() if not name.startswith("ray_")}
    docker_flags["backend"] = "docker"
    assert spec_with_flags(SandboxSpec(), docker_flags) == dataclasses.replace(SandboxSpec(), **docker_flags)


@pytest.mark.parametrize(
    ("given_flags", "message"),
    [
        ({"backend": "kvm"}, "--backend: 'kvm' is not one of"),
        ({"engine_path": "podman"}, "--engine-path: 'podman' is not one of auto, docker, runc-direct"),
        ({"backend": "local", "runtime": "runc"}, "--runtime: applies to the docker backend only"),
        ({"backend": "local", "engine_path": "runc-direct"}, "--engine-path: applies to the docker backend"),
        ({"backend": "ray", "isolation": "per-sample"}, "--isolation: applies to the docker backend only"),
        ({"backend": "docker", "ray_address": "127.0.0.1:1"}, "--ray-address: applies to the ray backend"),
    ],
)
def test_a_flag_the_backend_cannot_honour_is_named(given_flags: dict[str, Any], message: str) -> None:
    with pytest.raises(UserError, match=message):
        spec_with_flags(SandboxSpec(), given_flags)


def test_a_config_option_the_flagged_backend_cannot_honour_is_refused_not_dropped() -> None:
    with pytest.raises(UserError, match="--backend local: runtime runsc needs the docker backend"):
        spec_with_flags(SandboxSpec(runtime="runsc"), {"backend": "local"})


def test_only_given_spec_options_are_gathered() -> None:
    arguments = {"backend": "auto", "runtime": None, "ray_allow_unauthenticated": False, "quick": True}
    assert given_sandbox_flags(arguments) == {"backend": "auto"}


config_sections = st.fixed_dictionaries(
    {},
    optional={
        "backend": st.sampled_from(CHOICES["backend"]),
        "runtime": st.sampled_from(CHOICES["runtime"]),
        "isolation": st.sampled_from(CHOICES["isolation"]),
        "engine_path": st.sampled_from(CHOICES["engine_path"]),
        "docker_host": st.one_of(st.none(), st.just("unix:///run/docker-gvisor.sock")),
        "pool_size": st.integers(min_value=-1, max_value=4),
        "max_concurrent_executions": st.one_of(st.none(), st.integers(min_value=0, max_value=3)),
        "ray_allow_unauthenticated": st.booleans(),
    },
)


@settings(max_examples=60, deadline=None)
@given(section=config_sections)
def test_the_config_section_accepts_what_the_spec_accepts(section: dict[str, Any]) -> None:
    try:
        expected: SandboxSpec | None = SandboxSpec(**section)
    except ValueError:
        expected = None
    if expected is not None and docker_only_problem(expected):
        expected = None
    try:
        config = SandboxConfig.model_validate(section)
    except ValidationError:
        assert expected is None
        return
    assert config.spec == expected


def test_the_audit_opens_the_configs_spec_with_the_flags_over_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--limits-from's sandbox, every option of it, with --engine-path laid over: what an eval
    with that config opens. An option dropped on the way (as rescore once dropped gVisor) fails."""
    from proctor.agent.cli import audit_cmd

    config = tmp_path / "run.yaml"
    config.write_text(
        "sandbox:\n  runtime: runsc\n  isolation: per-sample\n  engine_path: docker\n"
        "  docker_host: unix:///run/docker-gvisor.sock\n  image: proctor-sandbox:dev\n"
        "  pool_size: 3\n  max_concurrent_executions: 2\n  memory: 256m\n  cpus: 0.5\n"
    )
    opened: list[SandboxSpec] = []

    async def opener(spec: SandboxSpec) -> Sandbox:
        opened.append(spec)
        raise SandboxUnavailable("not opened by this test")

    monkeypatch.setattr(audit_cmd, "open_audited_sandbox", opener)
    result = proctor_in_process(
        "sandbox", "audit", "--limits-from", str(config), "--engine-path", "runc-direct", "--quick"
    )
    assert result.returncode == 2, result.stderr
    assert "--runtime runsc: not opened by this test" in result.stderr
    assert opened == [
        SandboxSpec(
            runtime="runsc",
            isolation="per-sample",
            engine_path="runc-direct",
            docker_host="unix:///run/docker-gvisor.sock",
            image="proctor-sandbox:dev",
            pool_size=3,
            max_concurrent_executions=2,
            default_limits=Limits(memory_bytes=256 * 2**20, cpus=0.5),
            probe_libraries=False,
        )
    ]
