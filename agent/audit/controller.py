"""SIGKILL of the controlling process, then the deadline sweep (docker backend only).

The audit starts this module as a separate controller process: it opens its own docker
sandbox from the spec it is given as one record (the audited image, runtime, engine and engine
path), says its run ID, and starts one long call. The audit SIGKILLs it mid-call and then
watches the container with that run ID, by ID: it must stop (or be gone) within the call's
deadline plus the launcher's backstop grace, with nobody cleaning up. Under the engine's path
the engine knows the container by its labels; under runc-direct, Proctor's runc root knows it
by its name (owner pid and run ID).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proctor.agent.audit.model import AuditContext, Check, Finding, Verdict, escape_text

if TYPE_CHECKING:
    from proctor.sandbox import SandboxSpec

KLASS = "enforcement"
DEADLINE_S = 3.0
# The launcher's own alarm fires this long after the deadline (proctor.sandbox.reaper.BACKSTOP_GRACE_S);
# a few seconds more for the engine to notice on a loaded machine.
SWEEP_GRACE_S = 5.0 + 6.0
RUN_ID_LABEL = "proctor.run_id"
OWNER_PID_LABEL = "proctor.owner_pid"
OWNER_HOST_LABEL = "proctor.owner_host"


async def _controller(spec: SandboxSpec, deadline: float) -> None:
    from proctor.sandbox import open_sandbox

    sandbox = await open_sandbox(spec)
    print(json.dumps({"run_id": sandbox.describe().get("run_id"), "pid": os.getpid()}), flush=True)
    await sandbox.exec("import time\nwhile True:\n    time.sleep(0.05)\n", timeout=deadline)


def _container_state(client: Any, container_id: str) -> str:
    from docker.errors import NotFound

    try:
        return str(client.api.inspect_container(container_id)["State"]["Status"])
    except NotFound:
        return "gone"


def _find_container(client: Any, run_id: str | None, pid: int) -> str | None:
    """The controller's container: by its run ID, else by the owner labels every container carries."""
    if run_id:
        labels = [f"{RUN_ID_LABEL}={run_id}"]
    else:
        labels = [f"{OWNER_PID_LABEL}={pid}", f"{OWNER_HOST_LABEL}={socket.gethostname()}"]
    found = client.api.containers(all=True, filters={"label": labels})
    return str(found[0]["Id"]) if found else None


class _EngineContainers:
    """The controller's container as the engine knows it: by its labels, then by its ID."""

    def __init__(self, runtime: str, engine: str | None) -> None:
        from proctor.sandbox.docker.runtimes import connect_engine_for

        self.client = connect_engine_for(runtime, engine).client

    def find(self, run_id: str | None, pid: int) -> str | None:
        return _find_container(self.client, run_id, pid)

    def state(self, container_id: str) -> str:
        return _container_state(self.client, container_id)

    def remove(self, container_id: str) -> None:
        from proctor.sandbox.docker.containers import remove_container

        remove_container(self.client.api, container_id)

    def close(self) -> None:
        self.client.close()


class _DirectContainers:
    """runc-direct's container: in Proctor's runc root, named after its owner pid and run ID."""

    def __init__(self) -> None:
        self.owner: tuple[int, str] | None = None

    def find(self, run_id: str | None, pid: int) -> str | None:
        from proctor.sandbox.docker import oci_direct

        if not run_id:
            return None
        self.owner = (pid, run_id)
        found = sorted(oci_direct.RUNC_ROOT.glob(f"{oci_direct.NAME_PREFIX}{pid}-{run_id}-*"))
        return found[0].name if found else None

    def state(self, container_id: str) -> str:
        from proctor.sandbox.docker import oci_direct

        return oci_direct.state(container_id) or "gone"

    def remove(self, container_id: str) -> None:
        from proctor.sandbox.docker import oci_direct

        oci_direct.remove(container_id)

    def close(self) -> None:
        from proctor.sandbox.docker import oci_direct

        if self.owner is not None:
            # The dead controller's image mount and bundles: what the next command's sweep removes.
            pid, run_id = self.owner
            oci_direct.release_directory(oci_direct.STATE_ROOT / f"{pid}-{run_id}")


def _sweep_check(spec: SandboxSpec) -> Finding:
    """Start the controller on ``spec`` (passed whole, as its record), SIGKILL it mid-call, and
    watch its container where ``spec.engine_path`` puts it."""
    from proctor.sandbox.api import RUNC_DIRECT

    containers: _EngineContainers | _DirectContainers = (
        _DirectContainers()
        if spec.engine_path == RUNC_DIRECT
        else _EngineContainers(spec.runtime, spec.docker_host)
    )
    package_root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": package_root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    argv = [
        sys.executable,
        "-m",
        "proctor.agent.audit.controller",
        json.dumps(spec.record()),
        str(DEADLINE_S),
    ]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    container_id = None
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line:
            return Finding(
                Verdict.BROKEN,
                "the controller never started",
                escape_text(process.stderr.read() if process.stderr else ""),
            )
        announced = json.loads(line)
        run_id = announced.get("run_id")
        wait_until = time.monotonic() + 30
        while container_id is None and time.monotonic() < wait_until:
            container_id = containers.find(run_id, process.pid)
            time.sleep(0.1)
        if container_id is None:
            return Finding(
                Verdict.BROKEN,
                "no container of the controller's appeared",
                f"run_id {run_id}, pid {process.pid}",
            )
        while containers.state(container_id) != "running" and time.monotonic() < wait_until:
            time.sleep(0.1)
        time.sleep(0.5)  # the call is handed over right after the launcher is ready
        killed_at = time.monotonic()
        process.send_signal(signal.SIGKILL)
        process.wait()
        limit = DEADLINE_S + SWEEP_GRACE_S
        state = containers.state(container_id)
        while state == "running" and time.monotonic() - killed_at < limit:
            time.sleep(0.2)
            state = containers.state(container_id)
        after = time.monotonic() - killed_at
        evidence = escape_text(
            f"controller pid {process.pid} SIGKILLed mid-call (deadline {DEADLINE_S:g} s); container "
            f"{container_id[:12]} {state} {after:.1f} s later; allowed {limit:g} s"
        )
        if state == "running":
            return Finding(Verdict.BROKEN, f"still running {after:.1f} s after the controller died", evidence)
        return Finding(Verdict.HELD, f"{state} {after:.1f} s after the controller died", evidence)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if container_id is not None:
            with contextlib.suppress(Exception):
                containers.remove(container_id)
        containers.close()


async def controller_sweep(ctx: AuditContext) -> Finding:
    from proctor.sandbox import SandboxSpec
    from proctor.sandbox.api import DOCKER_PATH, RUNC

    # The controller opens the audited sandbox's image on its runtime and engine, by the engine
    # path the audited sandbox took (describe()'s record: the spec's auto may have chosen either).
    path_taken = str(ctx.sandbox.describe().get("engine_path") or DOCKER_PATH)
    spec = SandboxSpec(
        backend="docker",
        image=ctx.image,
        pool_size=0,
        runtime=ctx.runtime or RUNC,
        docker_host=ctx.engine,
        engine_path=path_taken,
    )
    return await asyncio.to_thread(_sweep_check, spec)


CHECKS = [
    Check(
        "enforce.controller_killed",
        KLASS,
        "SIGKILL the controlling process during a call with a 3 s deadline",
        "the container stops by the deadline + grace, by its ID",
        controller_sweep,
        timeout_s=60,
        backends=("docker",),
        not_applicable={
            "local": "the local backend has no container to outlive its controller",
            # Killing a node's worker mid-call would take a serving node out of the cluster; its
            # loss is the node-loss case tests/ray/test_ray_cluster.py kills a raylet for.
            "ray": "a ray call's controller is its node's worker actor, which the audit does not kill",
            "inspect": "kills Proctor's own controller process; an Inspect provider's controller is "
            "this audit, and its cleanup of a killed eval is the provider's cli_cleanup",
        },
    ),
]


if __name__ == "__main__":
    from proctor.sandbox import SandboxSpec as _Spec

    asyncio.run(_controller(_Spec.from_record(json.loads(sys.argv[1])), float(sys.argv[2])))
