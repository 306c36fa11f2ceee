"""A rescore reopens the sandbox its run recorded (sandbox/spec.py), changed only by explicit flags.

Invariant: the ``SandboxSpec`` a rescore opens equals the one its run opened, field by field,
unless the user overrides a field by name. The oracle is the run's own spec, built from the
config it started with and compared whole. Attack: a run whose owner chose gVisor is rescored
with no flags; under today's main the stored answer() ran under runc on the default engine.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proctor.agent.errors import UserError
from proctor.agent.inputs.config import ModelConfig, RunConfig, SandboxConfig
from proctor.agent.rescore.settings import RescoreFlags, rescore_config
from proctor.agent.rescore.stored_run import StoredRun, validate_config
from proctor.agent.run.run_header import recorded_config
from proctor.agent.run.run_sandbox import sandbox_spec
from proctor.agent.run.runner import execute_run
from proctor.sandbox import Limits, SandboxSpec, option_choices
from tests.rescore.conftest import quiet_progress, read_lines, rescore
from tests.rescore.test_rescore_frontiermath import write_tasks
from tests.runner.test_frontiermath_runs import submitting_model
from tests.sandbox.conftest import RUNSC_INSTALLED
from tests.support.scripted_server import ScriptedServer

CHOICES = option_choices()
names = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=12)
sockets = st.sampled_from(["unix:///var/run/docker.sock", "unix:///run/proctor-gvisor/docker.sock"])


@st.composite
def sandbox_configs(draw: st.DrawFn) -> SandboxConfig:
    """Every section a config may hold: docker's own options only where the backend is docker's."""
    backend = draw(st.sampled_from(CHOICES["backend"]))
    docker = backend in ("auto", "docker")
    return SandboxConfig(
        backend=backend,
        image=draw(st.none() | names),
        pool_size=draw(st.integers(0, 8)),
        memory=draw(st.sampled_from(["256m", "1g", "4g", "1536m"])),
        cpus=draw(st.sampled_from([0.5, 1.0, 2.0, 3.25])),
        max_concurrent_executions=draw(st.none() | st.integers(1, 64)),
        runtime=draw(st.sampled_from(CHOICES["runtime"])) if docker else "runc",
        docker_host=draw(st.none() | sockets) if backend != "local" and docker else None,
        isolation=draw(st.sampled_from(CHOICES["isolation"])) if docker else "fresh",
        engine_path=draw(st.sampled_from(CHOICES["engine_path"] if docker else ("auto", "docker"))),
        ray_address=draw(st.none() | st.just("127.0.0.1:6379")) if backend in ("auto", "ray") else None,
        ray_allow_unauthenticated=draw(st.booleans()),
    )


specs = st.builds(
    SandboxSpec,
    backend=st.sampled_from(CHOICES["backend"]),
    image=st.none() | names,
    pool_size=st.integers(0, 100),
    default_limits=st.none()
    | st.builds(
        Limits,
        memory_bytes=st.integers(1, 2**40),
        cpus=st.floats(0.01, 64, allow_nan=False),
        pids=st.integers(1, 4096),
    ),
    max_concurrent_executions=st.none() | st.integers(1, 1000),
    probe_libraries=st.booleans(),
    runtime=st.sampled_from(CHOICES["runtime"]),
    docker_host=st.none() | sockets,
    isolation=st.sampled_from(CHOICES["isolation"]),
    engine_path=st.sampled_from(CHOICES["engine_path"]),
    ray_address=st.none() | names,
    ray_allow_unauthenticated=st.booleans(),
)


@settings(max_examples=40, deadline=None)
@given(specs)
def test_a_spec_recorded_in_run_json_reads_back_equal(spec: SandboxSpec) -> None:
    assert SandboxSpec.from_record(json.loads(json.dumps(spec.record()))) == spec


def stored_run(directory: Path, config: RunConfig) -> StoredRun:
    """The run as rescore reads it: run.json's config through the schema a run's goes through."""
    recorded = json.loads(json.dumps(recorded_config(config)))
    header: dict[str, Any] = {"run_id": "r", "track": config.track, "config": recorded}
    return StoredRun(directory, header, validate_config(recorded, directory / "run.json"), [])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sandbox_configs())
def test_every_sandbox_option_survives_run_json_into_the_rescore(tmp_path: Path, box: SandboxConfig) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", fixed=True)
    config = RunConfig(track="frontiermath", tasks=tasks, models=[ModelConfig(name="openai/m")], sandbox=box)
    again = rescore_config(stored_run(tmp_path, config), None, RescoreFlags())
    assert sandbox_spec(again.sandbox) == sandbox_spec(box)


def test_only_an_explicit_flag_changes_the_recorded_spec(tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", fixed=True)
    box = SandboxConfig(backend="auto", runtime="runsc", isolation="per-sample", engine_path="docker")
    config = RunConfig(track="frontiermath", tasks=tasks, models=[ModelConfig(name="openai/m")], sandbox=box)
    again = rescore_config(stored_run(tmp_path, config), None, RescoreFlags(backend="docker"))
    assert sandbox_spec(again.sandbox) == sandbox_spec(box).replace(backend="docker")
    # A backend that cannot honour the recorded runtime is refused in one line, never a downgrade.
    with pytest.raises(
        UserError,
        match=r"^command line: field 'sandbox': runtime runsc needs the docker backend \(backend is local\)$",
    ) as refused:
        rescore_config(stored_run(tmp_path, config), None, RescoreFlags(backend="local"))
    assert "\n" not in str(refused.value)


def test_a_config_file_changes_only_the_sandbox_fields_it_names(tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", fixed=True)
    box = SandboxConfig(backend="docker", runtime="runsc", docker_host="unix:///run/g.sock", memory="1g")
    config = RunConfig(track="frontiermath", tasks=tasks, models=[ModelConfig(name="openai/m")], sandbox=box)
    override = tmp_path / "grading.yaml"
    override.write_text("sandbox:\n  memory: 2g\n  pool_size: 0\n")
    again = rescore_config(stored_run(tmp_path, config), override, RescoreFlags())
    changed = box.model_copy(update={"memory": "2g", "pool_size": 0})
    assert sandbox_spec(again.sandbox) == sandbox_spec(changed)
    assert sandbox_spec(again.sandbox).runtime == "runsc"


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"runtime": "gvisor"}, "unknown container runtime 'gvisor': choose one of runc, runsc"),
        ({"backend": "host"}, "unknown sandbox backend 'host'"),
        ({"isolation": "recycled"}, "unknown sandbox isolation 'recycled'"),
        ({"engine_path": "crun"}, "unknown engine path 'crun'"),
        ({"runtime": "runsc", "seccomp": False}, "field 'seccomp' is not a sandbox option"),
        ({"pool_size": True}, "field 'pool_size': True is not a int"),
        ({"pool_size": -1}, "pool_size -1"),
        ({"max_concurrent_executions": 0}, "max_concurrent_executions 0"),
        ({"default_limits": {"memory_bytes": "4g"}}, "field 'default_limits.memory_bytes'"),
        ({"default_limits": {"network": True}}, "field 'default_limits.network' is not a limit"),
        ({"default_limits": {"cpus": float("nan")}}, "field 'default_limits.cpus': nan is not a positive"),
        ({"default_limits": {"pids": 0}}, "field 'default_limits.pids': 0 is not a positive number"),
        ({"docker_host": 7}, "field 'docker_host': 7 is not a str"),
        ([], "not an object"),
    ],
)
def test_an_edited_spec_is_refused_naming_its_field(record: Any, message: str) -> None:
    with pytest.raises(ValueError) as refused:
        SandboxSpec.from_record(record)
    assert message in str(refused.value) and "\n" not in str(refused.value)


def test_honest_recorded_specs_read_back() -> None:
    """Specs recorded before a field existed take its default; every honest value is accepted."""
    assert SandboxSpec.from_record({}) == SandboxSpec()
    assert SandboxSpec.from_record({"backend": "local", "default_limits": {"cpus": 2}}) == SandboxSpec(
        backend="local", default_limits=Limits(cpus=2)
    )
    assert SandboxSpec.from_record({"runtime": "runsc", "docker_host": None}).runtime == "runsc"


# -- under gVisor ------------------------------------------------------------------------------

# answer() returns 42 only where the kernel it sees is not the host's: gVisor's own (4.4.0).
UNDER_GVISOR = (
    f"import os\ndef answer():\n    return 42 if os.uname().release != {os.uname().release!r} else 0\n"
)


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.runsc
@pytest.mark.skipif(not RUNSC_INSTALLED, reason="gVisor (runsc) is not installed: bash .ci/setup-gvisor.sh")
async def test_a_gvisor_runs_rescore_runs_answer_under_gvisor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    tasks = write_tasks(tmp_path / "tasks.jsonl", fixed=True)
    box = SandboxConfig(backend="docker", runtime="runsc", pool_size=1, memory="512m", calibrate=False)
    config = RunConfig(
        track="frontiermath",
        tasks=tasks,
        out=tmp_path / "run",
        models=[ModelConfig(name="openai/scripted", base_url="http://127.0.0.1:1/v1", max_retries=0)],
        sandbox=box,
        max_concurrency=2,
    )
    with ScriptedServer(submitting_model()) as server:
        config.models[0].base_url = server.base_url
        assert (
            await execute_run(config, progress=quiet_progress(), handle_signals=False)
        ).status == "finished"
    first = json.loads((tmp_path / "run" / "run.json").read_text())
    assert first["sandbox"]["runtime"] == "runsc"

    # The stored submissions now say which kernel their answer() saw.
    samples = tmp_path / "run" / "samples.jsonl"
    stored = read_lines(samples)
    for record in stored:
        record["submission"]["code"] = UNDER_GVISOR
    samples.write_text("".join(json.dumps(r) + "\n" for r in stored))

    again = await rescore(tmp_path / "run", tmp_path / "again")  # no flags: as a new user would
    assert again.status == "finished" and again.rescored_now == 2
    header = json.loads((tmp_path / "again" / "run.json").read_text())
    assert header["sandbox"]["runtime"] == "runsc"
    assert SandboxSpec.from_record(header["sandbox_spec"]) == SandboxSpec.from_record(first["sandbox_spec"])
    outcomes = {r["task_id"]: r["outcome"] for r in read_lines(tmp_path / "again" / "samples.jsonl")}
    assert outcomes == {"fm-0": "correct", "fm-1": "correct"}, "answer() ran outside gVisor"
