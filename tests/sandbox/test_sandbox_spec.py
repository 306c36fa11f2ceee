"""``open_sandbox`` takes one ``SandboxSpec`` and hands that very value to the backend's opener.

Invariant: the opener receives the spec it was given, unchanged; a backend that cannot honour
an option refuses it in one line. No engine is needed: the registry's docker opener is replaced
by a recorder, and the local and ray openers refuse before they start anything.
"""

from __future__ import annotations

from typing import Any

import pytest

from proctor.sandbox import Limits, SandboxSpec, SandboxUnavailable, open_sandbox, option_choices, registry


class Opened(Exception):
    """Raised by the recording opener: the spec reached it, and nothing was started."""


@pytest.mark.parametrize(
    "spec",
    [
        SandboxSpec(backend="docker", runtime="runsc", docker_host="unix:///run/g.sock", pool_size=0),
        SandboxSpec(backend="auto", isolation="per-sample", engine_path="runc-direct", image="img:1"),
        SandboxSpec(backend="docker", default_limits=Limits(memory_bytes=1 << 28, cpus=2.5)),
    ],
)
async def test_the_opener_receives_the_very_spec_it_was_given(
    spec: SandboxSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    received: list[SandboxSpec] = []

    async def recorder(given: SandboxSpec) -> Any:
        received.append(given)
        raise Opened

    monkeypatch.setitem(registry._OPENERS, "docker", recorder)
    with pytest.raises(Opened):
        await open_sandbox(spec)
    assert received == [spec] and received[0] is spec


async def test_the_keyword_convenience_builds_the_same_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    received: list[SandboxSpec] = []

    async def recorder(given: SandboxSpec) -> Any:
        received.append(given)
        raise Opened

    monkeypatch.setitem(registry._OPENERS, "docker", recorder)
    with pytest.raises(Opened):
        await open_sandbox("docker", runtime="runsc", pool_size=0, max_concurrent_executions=3)
    assert received == [
        SandboxSpec(backend="docker", runtime="runsc", pool_size=0, max_concurrent_executions=3)
    ]
    with pytest.raises(Opened):
        await open_sandbox("docker", runtime=None)  # None: the default runtime, as it always was
    assert received[-1] == SandboxSpec(backend="docker")


async def test_a_spec_and_keywords_together_are_refused() -> None:
    with pytest.raises(TypeError, match="a SandboxSpec or a backend name with options, not both"):
        await open_sandbox(SandboxSpec(), runtime="runsc")
    with pytest.raises(TypeError):
        await open_sandbox("docker", seccomp=False)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (SandboxSpec(backend="local", runtime="runsc"), "the local backend has no container runtime"),
        (
            SandboxSpec(backend="local", isolation="per-sample"),
            "isolation per-sample needs the docker backend",
        ),
        (SandboxSpec(backend="ray", runtime="runsc"), "the ray backend's engines are its workers'"),
        (SandboxSpec(backend="ray", engine_path="runc-direct"), "the ray backend's engines are its workers'"),
    ],
)
async def test_a_backend_refuses_in_one_line_what_it_cannot_honour(spec: SandboxSpec, message: str) -> None:
    with pytest.raises(SandboxUnavailable) as refused:
        await open_sandbox(spec)
    assert message in str(refused.value) and "\n" not in str(refused.value)


def test_the_registry_is_the_one_list_of_backends() -> None:
    assert option_choices()["backend"] == ("auto", *registry.backend_names())
    with pytest.raises(ValueError, match="unknown sandbox backend 'gvisor': choose one of auto, docker"):
        SandboxSpec(backend="gvisor")


def test_honest_specs_are_accepted() -> None:
    for backend in option_choices()["backend"]:
        assert SandboxSpec(backend=backend).backend == backend
    for runtime in option_choices()["runtime"]:
        assert SandboxSpec(runtime=runtime).chooses_docker_options() == (runtime != "runc")
