"""The provider's config: the same SandboxSpec ``proctor run`` builds, and one line per mistake.

Invariant: for every setting both understand, the provider's spec equals the one ``proctor run``
builds from the same ``sandbox`` section (agent/run/run_sandbox.py:sandbox_spec is the oracle);
every bad file or field is refused with a line naming the file and the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.agent.inputs.config import SandboxConfig
from proctor.agent.run.run_sandbox import sandbox_spec
from proctor.sandbox.api import FRESH, PER_SAMPLE, Limits
from proctor.sandbox.inspect_provider import config as provider_config
from proctor.sandbox.inspect_provider.config import (
    ProctorSandboxConfig,
    ProviderConfigError,
    config_from_mapping,
    load_config,
)

REPO = Path(__file__).resolve().parents[2]

shared_sections = st.fixed_dictionaries(
    {},
    optional={
        "memory": st.sampled_from(["512m", "1g", "1.5g", "4g", "3000m"]),
        "cpus": st.sampled_from([0.5, 1.0, 2.0, 1.25]),
        "runtime": st.sampled_from(["runc", "runsc"]),
        "isolation": st.sampled_from([FRESH, PER_SAMPLE]),
        "image": st.sampled_from(["proctor/frontiermath-python:abc", "python:3.12-slim"]),
        "docker_host": st.sampled_from(["unix:///run/other.sock", "tcp://127.0.0.1:2375"]),
        "pool_size": st.integers(0, 6),
        "engine_path": st.sampled_from(["auto", "docker", "runc-direct"]),
        "max_concurrent_executions": st.integers(1, 8),
    },
)


@settings(max_examples=25, deadline=None)
@given(section=shared_sections)
def test_a_sandbox_section_means_what_proctor_run_makes_of_it(
    section: dict[str, Any], tmp_path_factory: Any
) -> None:
    run_spec = sandbox_spec(SandboxConfig(backend="docker", **section))
    path = tmp_path_factory.mktemp("cfg") / "run.yaml"
    path.write_text(yaml.safe_dump({"model": {"name": "x"}, "sandbox": {"backend": "docker", **section}}))
    ours = load_config(str(path)).spec
    assert ours == run_spec
    # The section alone (no run around it) differs only where the provider's default does.
    alone = config_from_mapping(section, "config").spec
    assert alone.replace(isolation=run_spec.isolation) == run_spec
    assert alone.isolation == section.get("isolation", PER_SAMPLE)


def test_the_repositorys_example_run_config_reads_as_that_run_would_open_it() -> None:
    path = REPO / "configs" / "examples" / "frontiermath-openai.yaml"
    section = yaml.safe_load(path.read_text())["sandbox"]
    run_keys = {k: v for k, v in section.items() if k in SandboxConfig.model_fields}
    assert load_config(str(path)).spec == sandbox_spec(SandboxConfig(**run_keys))


def test_defaults_are_one_container_per_sample_without_network() -> None:
    parsed = load_config(None)
    assert parsed.isolation == PER_SAMPLE and parsed.network is False
    assert parsed.limits == Limits() and parsed.spec.backend == "docker" and parsed.spec.runtime == "runc"


def test_the_config_object_and_a_file_with_the_same_settings_agree(tmp_path: Path) -> None:
    settings_ = {
        "memory": "2g",
        "cpus": 2.0,
        "pids": 64,
        "tmpfs": "128m",
        "isolation": "fresh",
        "pool_size": 1,
    }
    path = tmp_path / "proctor.yaml"
    path.write_text(yaml.safe_dump(settings_))
    from_file = load_config(str(path))
    from_object = load_config(ProctorSandboxConfig(**settings_))
    assert from_file.spec == from_object.spec
    assert from_file.limits == Limits(memory_bytes=2 << 30, cpus=2.0, pids=64, tmpfs_bytes=128 << 20)


def test_the_object_form_knows_exactly_the_files_keys() -> None:
    assert set(ProctorSandboxConfig.model_fields) == set(provider_config._KNOWN_KEYS)


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("memory: lots\n", "field 'memory'"),
        ("memory: -5\n", "field 'memory'"),
        ("cpus: 0\n", "field 'cpus'"),
        ("cpus: .inf\n", "field 'cpus'"),
        ("pids: 2\n", "field 'pids'"),
        ("pids: true\n", "field 'pids'"),
        ("isolation: per-call\n", "field 'isolation'"),
        ("runtime: kata\n", "field 'runtime'"),
        ("network: yes please\n", "field 'network'"),
        ("runtime: runsc\nnetwork: true\n", "field 'network'"),
        ("isolation: fresh\nnetwork: true\n", "field 'network'"),
        ("image: ''\n", "field 'image'"),
        ("engine_path: warp\n", "field 'engine_path'"),
        ("pool_size: -1\n", "field 'pool_size'"),
        ("memroy: 1g\n", "field 'memroy'"),
        ("- a list\n", "want a mapping"),
        ("memory: 1g\ncpus: [1\n", "proctor.yaml:"),
        ("sandbox:\n  backend: local\n", "field 'backend'"),
        ("sandbox:\n  timeout_s: 10\n  memroy: 1g\n", "field 'memroy'"),
    ],
)
def test_a_bad_config_is_one_line_naming_file_and_field(tmp_path: Path, text: str, named: str) -> None:
    path = tmp_path / "proctor.yaml"
    path.write_text(text)
    with pytest.raises(ProviderConfigError) as caught:
        load_config(str(path))
    message = str(caught.value)
    assert "\n" not in message and str(path) in message and named in message


def test_a_missing_file_names_itself(tmp_path: Path) -> None:
    with pytest.raises(ProviderConfigError, match=r"absent\.yaml: cannot read"):
        load_config(str(tmp_path / "absent.yaml"))


def test_an_unknown_config_object_field_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="memroy"):
        ProctorSandboxConfig(memroy="1g")  # type: ignore[call-arg]
