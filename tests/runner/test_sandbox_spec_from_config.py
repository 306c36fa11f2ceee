"""The config's ``sandbox`` section reaches ``open_sandbox`` as one SandboxSpec, every option by
name and unchanged (agent/run/run_sandbox.py: sandbox_spec).

Invariant: each option the spec has is either a field of the config section, passed through
as the user wrote it, or one the run sets itself (the call limits, from ``memory`` and ``cpus``;
the local backend's import probe). Oracle: the section's own ``model_dump``. A spec field added
without a config field, or a config field the spec stops reading, fails here, before a run
silently opens the default instead (the drift issue 37 found in rescore).
"""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.agent.inputs.config import NOT_IN_THE_CONFIG, SandboxConfig
from proctor.agent.run.run_sandbox import sandbox_spec
from proctor.sandbox import Limits, SandboxSpec, option_choices

SPEC_FIELDS = {field.name for field in dataclasses.fields(SandboxSpec)}


def test_every_spec_option_is_a_config_field_or_set_by_the_run() -> None:
    assert SandboxConfig.model_fields.keys() >= SPEC_FIELDS - NOT_IN_THE_CONFIG
    assert NOT_IN_THE_CONFIG <= SPEC_FIELDS


docker_sections = st.fixed_dictionaries(
    {
        "backend": st.sampled_from(["auto", "docker"]),
        "runtime": st.sampled_from(option_choices()["runtime"]),
        "isolation": st.sampled_from(option_choices()["isolation"]),
        "engine_path": st.sampled_from(option_choices()["engine_path"]),
        "docker_host": st.one_of(
            st.none(), st.sampled_from(["unix:///run/docker-gvisor.sock", "tcp://127.0.0.1:2375"])
        ),
        "image": st.one_of(
            st.none(), st.sampled_from(["proctor-sandbox:dev", "registry.example/img@sha256:" + "a" * 64])
        ),
        "pool_size": st.integers(0, 8),
        "max_concurrent_executions": st.one_of(st.none(), st.integers(1, 64)),
        "memory": st.sampled_from(["512m", "4g", "1.5g"]),
        "cpus": st.sampled_from([0.5, 1.0, 2.0]),
    }
)
ray_sections = st.fixed_dictionaries(
    {
        "backend": st.just("ray"),
        "ray_address": st.one_of(st.none(), st.sampled_from(["127.0.0.1:6379", "10.0.0.5:6380"])),
        "ray_allow_unauthenticated": st.booleans(),
        "pool_size": st.integers(0, 4),
    }
)


@settings(max_examples=40, deadline=None)
@given(st.one_of(docker_sections, ray_sections, st.just({"backend": "local"}), st.just({})))
def test_every_option_passes_through_by_name_unchanged(section: dict[str, object]) -> None:
    box = SandboxConfig.model_validate(section)
    spec = sandbox_spec(box)
    written = box.model_dump()
    for name in SPEC_FIELDS - NOT_IN_THE_CONFIG:
        assert getattr(spec, name) == written[name], name
    assert isinstance(spec.default_limits, Limits) and spec.default_limits.cpus == box.cpus
    # And what run.json records reads back as the very same spec (what a rescore reopens).
    assert SandboxSpec.from_record(spec.record()) == spec
