"""Choosing the container runtime (runc, gVisor's runsc): flags, config, engine selection,
refusals, what run.json records, and a crashed gVisor sandbox reported as a sandbox failure."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from proctor.agent.inputs.config import SandboxConfig
from proctor.sandbox import Limits, SandboxError, SandboxUnavailable
from proctor.sandbox.docker import runtimes as runtimes_module
from proctor.sandbox.docker.runtimes import (
    GVISOR_BASE_PIDS,
    GVISOR_PIDS_PER_TASK,
    connect_engine_for,
    host_pids_limit,
    program_process_limit,
)
from tests.runner.test_frontiermath_runs import submitting_model, write_fm_tasks
from tests.sandbox.conftest import RUNSC_INSTALLED, TEST_LIMITS, run_proctor
from tests.support.scripted_server import ScriptedServer

REPO = Path(__file__).resolve().parents[2]
MAIN_ENGINE = "unix:///var/run/docker.sock"
needs_runsc = pytest.mark.skipif(
    not RUNSC_INSTALLED, reason="gVisor (runsc) is not installed: bash .ci/setup-gvisor.sh"
)


def one_line_error(completed: subprocess.CompletedProcess[str]) -> str:
    assert completed.returncode == 2, completed
    assert "Traceback" not in completed.stderr
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("proctor: error:"), completed.stderr
    return lines[0]


# -- sizes ---------------------------------------------------------------------------------------


def test_runc_keeps_the_pids_cgroup_as_the_only_process_bound() -> None:
    limits = Limits(pids=128)
    assert program_process_limit("runc", limits) is None
    assert host_pids_limit("runc", limits) == 128


@pytest.mark.parametrize(
    ("pids", "memory_mib", "expected"),
    [(256, 1024, 170), (128, 512, 85), (32, 512, 30), (3, 512, 1), (1, 4, 1)],
)
def test_runsc_bounds_the_program_inside_gvisor_by_pids_and_memory(
    pids: int, memory_mib: int, expected: int
) -> None:
    limits = Limits(pids=pids, memory_bytes=memory_mib * 1024 * 1024)
    assert program_process_limit("runsc", limits) == expected
    # The cgroup leaves room for gVisor's own threads beside the program at its bound.
    assert host_pids_limit("runsc", limits) == GVISOR_BASE_PIDS + GVISOR_PIDS_PER_TASK * expected


# -- configuration and flags -------------------------------------------------------------------


def test_config_refuses_a_runtime_for_the_local_backend() -> None:
    with pytest.raises(ValidationError, match="runtime runsc needs the docker backend"):
        SandboxConfig(backend="local", runtime="runsc")
    with pytest.raises(ValidationError):
        SandboxConfig(runtime="kata")  # type: ignore[arg-type]
    assert SandboxConfig().runtime == "runc" and SandboxConfig().docker_host is None


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--runtime", "kata"], "--runtime: 'kata' is not one of runc, runsc"),
        (["--backend", "local", "--runtime", "runsc"], "--runtime: applies to the docker backend only"),
        (
            ["--backend", "local", "--docker-host", MAIN_ENGINE],
            "--docker-host: applies to the docker backend",
        ),
    ],
)
def test_bad_runtime_flags_are_one_line(flags: list[str], needle: str, tmp_path: Path) -> None:
    program = tmp_path / "p.py"
    program.write_text("print(1)\n")
    assert needle in one_line_error(run_proctor("sandbox", "exec", *flags, str(program)))


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--runtimes", "runc,kata"], "--runtimes: 'kata' is not one of runc, runsc"),
        (["--runtime", "gvisor"], "--runtime: 'gvisor' is not one of runc, runsc"),
        (["--runtimes", " , "], "--runtimes: name at least one runtime"),
    ],
)
def test_bench_runtime_flags_are_checked_before_anything_runs(flags: list[str], needle: str) -> None:
    assert needle in one_line_error(run_proctor("bench", "sandbox", *flags))


def test_no_engine_offering_runsc_is_one_line_naming_each_engine_and_the_fix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/absent-default.sock")
    monkeypatch.setattr(runtimes_module, "GVISOR_ENGINE", f"unix://{tmp_path}/absent-gvisor.sock")
    with pytest.raises(SandboxUnavailable) as caught:
        connect_engine_for("runsc")
    message = str(caught.value)
    assert "\n" not in message and message.startswith("runtime runsc: no Docker engine offers it")
    assert "absent-default.sock" in message and "absent-gvisor.sock" in message
    assert "bash .ci/setup-gvisor.sh" in message


def test_runc_without_an_engine_keeps_the_usual_message(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/absent.sock")
    with pytest.raises(SandboxUnavailable, match=r"^no Docker engine answers"):
        connect_engine_for("runc")


@pytest.mark.docker
def test_the_main_engine_named_for_runsc_is_refused_never_run_under_runc(tmp_path: Path) -> None:
    program = tmp_path / "p.py"
    program.write_text("print('ran')\n")
    completed = run_proctor(
        "sandbox",
        "exec",
        "--runtime",
        "runsc",
        "--docker-host",
        MAIN_ENGINE,
        "--backend",
        "auto",
        str(program),
    )
    line = one_line_error(completed)
    assert f"{MAIN_ENGINE} offers only" in line and "runc" in line
    assert completed.stdout == ""  # nothing ran, not even under runc


# -- under gVisor ------------------------------------------------------------------------------


@pytest.mark.docker
@pytest.mark.runsc
@needs_runsc
def test_exec_under_runsc_runs_inside_gvisor(sandbox_image: str, tmp_path: Path) -> None:
    program = tmp_path / "p.py"
    # gVisor reports its own kernel (4.4.0 in this build), never the host's.
    program.write_text("import os\nprint(os.uname().release)\n")
    completed = run_proctor(
        "sandbox", "exec", "--runtime", "runsc", "--image", sandbox_image, "--json", str(program)
    )
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout)
    assert result["exit_code"] == 0 and result["extra"]["runtime"] == "runsc"
    assert result["stdout"].strip() != os.uname().release


@pytest.mark.docker
@pytest.mark.runsc
@needs_runsc
async def test_a_crashed_gvisor_sandbox_is_a_sandbox_error_not_the_programs_exit(
    sandbox_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import proctor.sandbox.docker.containers
    from proctor.sandbox.docker.backend import open_docker_sandbox

    # A pids cgroup far too small for gVisor's own threads: its sentry panics (exit 2, no
    # launcher report) once the program has started a few processes.
    monkeypatch.setattr(proctor.sandbox.docker.containers, "host_pids_limit", lambda runtime, limits: 120)
    opened = await open_docker_sandbox(
        image=sandbox_image, pool_size=0, default_limits=TEST_LIMITS, runtime="runsc"
    )
    code = (
        "import os, time\nprint('started', flush=True)\n"
        "for _ in range(100):\n    if os.fork() == 0:\n        time.sleep(30)\n        os._exit(0)\n"
        "print('all forked')\n"
    )
    try:
        with pytest.raises(SandboxError, match="gVisor sandbox crashed"):
            await opened.exec(code, timeout=60)
        # The sandbox is still usable afterwards, with a fresh container.
        monkeypatch.undo()
        result = await opened.exec("print('after')", timeout=60)
        assert (result.exit_code, result.stdout) == (0, "after\n")
    finally:
        await opened.aclose()


@pytest.mark.docker
@pytest.mark.runsc
@needs_runsc
def test_run_with_runtime_runsc_records_runtime_engine_version_and_image(
    sandbox_image: str, tmp_path: Path
) -> None:
    tasks = write_fm_tasks(tmp_path / "tasks.jsonl", 1)
    out = tmp_path / "run"
    config = tmp_path / "run.yaml"
    config.write_text(
        f"sandbox:\n  backend: docker\n  runtime: runsc\n  image: {sandbox_image}\n  pool_size: 1\n"
    )
    with ScriptedServer(submitting_model()) as server:
        completed = subprocess.run(
            [
                *("proctor", "run", str(config), "--track", "frontiermath", "--model", "openai/scripted"),
                *("--tasks", str(tasks), "--out", str(out)),
            ],
            cwd=REPO,
            env={**os.environ, "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "test"},
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-2000:]
    header = json.loads((out / "run.json").read_text())
    box = header["sandbox"]
    assert box["runtime"] == "runsc" and header["config"]["sandbox"]["runtime"] == "runsc"
    assert str(box["runtime_version"]).startswith("runsc version")
    assert str(box["engine"]).startswith("unix://") and str(box["image_id"]).startswith("sha256:")
    # engine_path auto under runsc: the engine's path, and the record says why.
    assert box["engine_path"] == "docker" and header["config"]["sandbox"]["engine_path"] == "auto"
    assert box["engine_path_reason"] == "auto: runtime runsc: runc-direct runs runc only"
    assert header["sessions"][-1]["sandbox_engine_path"] == "docker"


def test_run_flags_set_the_runtime_and_engine_of_the_run_config() -> None:
    from proctor.agent.run.config_loader import RunFlags, load_run_config

    tasks = REPO / "configs" / "tasks" / "frontiermath-samples.jsonl"
    flags = RunFlags(
        track="frontiermath", tasks=tasks, models=["openai/x"], runtime="runsc", docker_host="unix:///x.sock"
    )
    config = load_run_config(None, flags)
    assert (config.sandbox.runtime, config.sandbox.docker_host) == ("runsc", "unix:///x.sock")
    assert (
        load_run_config(
            None, RunFlags(track="frontiermath", tasks=tasks, models=["openai/x"])
        ).sandbox.runtime
        == "runc"
    )
