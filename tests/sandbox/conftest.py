"""Sandboxes shared by the conformance suite: one per backend per test session (per xdist worker)."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from proctor.sandbox import Limits, Sandbox, open_sandbox

TEST_LIMITS = Limits(memory_bytes=512 * 1024 * 1024, pids=128, tmpfs_bytes=64 * 1024 * 1024)
_BUILD_LOCK = Path("/tmp/proctor-test-image-build.lock")


@pytest.fixture(scope="session")
def sandbox_image() -> Iterator[str]:
    """The pinned image, built once (idempotent; the lock keeps xdist workers from racing)."""
    from proctor.sandbox.docker.image import build_image

    with _BUILD_LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        info = build_image(log=lambda line: print(line, file=sys.stderr))
    yield info.tag


# runsc cases are skipped only where gVisor is genuinely not installed. Where it is (CI runs
# .ci/setup.sh, which runs .ci/setup-gvisor.sh), an engine that does not serve it is a failure.
RUNSC_INSTALLED = shutil.which("runsc") is not None
runsc = [
    pytest.mark.docker,
    pytest.mark.runsc,
    pytest.mark.skipif(
        not RUNSC_INSTALLED, reason="gVisor (runsc) is not installed: bash .ci/setup-gvisor.sh"
    ),
]
# Every docker case runs under both container runtimes.
DOCKER_RUNTIMES = [pytest.param("runc", marks=pytest.mark.docker), pytest.param("runsc", marks=runsc)]


@pytest.fixture(
    scope="session",
    params=[
        pytest.param(("docker", "runc"), marks=pytest.mark.docker, id="docker"),
        # The same backend and runtime, each container started by runc from the engine's spec
        # (sandbox.engine_path runc-direct, sandbox/docker/oci_direct.py): every case must agree.
        pytest.param(("docker", "runc", "runc-direct"), marks=pytest.mark.docker, id="docker-runc-direct"),
        pytest.param(("docker", "runsc"), marks=runsc, id="docker-runsc"),
        pytest.param(("local", None), id="local"),
    ],
)
def backend_spec(request: pytest.FixtureRequest) -> tuple[str, str | None, str]:
    backend, runtime, *path = request.param
    return str(backend), runtime, (path[0] if path else "docker")


@pytest.fixture(scope="session")
def backend_name(backend_spec: tuple[str, str | None, str]) -> str:
    return backend_spec[0]


@pytest.fixture(scope="session")
def sandbox_runtime(backend_spec: tuple[str, str | None, str]) -> str | None:
    """The container runtime of the docker cases (runc or runsc); None for the local backend."""
    return backend_spec[1]


@pytest.fixture(scope="session")
def sandbox_engine_path(backend_spec: tuple[str, str | None, str]) -> str:
    """Who starts the docker cases' containers: the engine (docker) or runc (runc-direct)."""
    return backend_spec[2]


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def sandbox(
    backend_name: str,
    sandbox_runtime: str | None,
    sandbox_engine_path: str,
    request: pytest.FixtureRequest,
) -> AsyncIterator[Sandbox]:
    image = request.getfixturevalue("sandbox_image") if backend_name == "docker" else None
    # The conformance cases never read describe()["libraries"]: skip the local import probe.
    opened = await open_sandbox(
        backend_name,
        image=image,
        pool_size=2,
        default_limits=TEST_LIMITS,
        probe_libraries=False,
        runtime=sandbox_runtime,
        engine_path=sandbox_engine_path,
    )
    assert opened.backend == backend_name
    assert opened.describe().get("runtime") == sandbox_runtime
    assert opened.describe().get("engine_path", "docker") == sandbox_engine_path
    try:
        yield opened
    finally:
        await opened.aclose()


def run_proctor(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["proctor", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def host_processes_of_container(container_id: str) -> list[int]:
    """Host PIDs serving a container (gVisor's sentry and gofer, the shim): their command lines
    carry its ID. Under runsc the program's own processes live inside the sentry and never
    appear in the host's /proc, so the sentry's end is theirs."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if container_id.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def container_processes_gone(container_id: str, within_s: float) -> bool:
    import time

    deadline = time.monotonic() + within_s
    while host_processes_of_container(container_id):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


CGROUP_ROOT = Path("/sys/fs/cgroup")


def processes_in_gone_containers() -> dict[str, list[int]]:
    """Host PIDs still in the cgroup v1 group (``/sys/fs/cgroup/*/docker/<id>``) of a container
    that no engine knows any more. A process there outlived its container: a traced process
    whose tracer is gone can sit in tracing stop after ``docker rm -f`` (seen on this engine).

    The groups are read before the engines are asked, so a container created in between (by a
    concurrent test) is known by then and never reported.
    """
    import docker

    from proctor.sandbox.docker.runtimes import known_engine_urls

    found: dict[str, set[int]] = {}
    for procs in CGROUP_ROOT.glob("*/docker/*/cgroup.procs"):
        try:
            pids = {int(pid) for pid in procs.read_text().split()}
        except (OSError, ValueError):
            continue  # the group went away while we read it
        if pids:
            found.setdefault(procs.parent.name, set()).update(pids)
    if not found:
        return {}
    live: set[str] = set()
    for url in known_engine_urls():
        client = docker.APIClient(base_url=url)
        try:
            live.update(container["Id"] for container in client.containers(all=True))
        finally:
            client.close()
    return {cid: sorted(pids) for cid, pids in found.items() if cid not in live}


def assert_no_process_in_gone_containers(within_s: float = 15.0, ignore: set[str] | None = None) -> None:
    """Fails when, ``within_s`` after a call, a process sits in a gone container's cgroup
    (removal of a container runs in the background and takes a moment under runsc).
    ``ignore``: containers already in that state before the call, which are not its doing."""
    import time

    def left_now() -> dict[str, list[int]]:
        return {
            cid: pids for cid, pids in processes_in_gone_containers().items() if cid not in (ignore or set())
        }

    deadline = time.monotonic() + within_s
    while (left := left_now()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"processes outlived their container (container id: host pids): {left}"
