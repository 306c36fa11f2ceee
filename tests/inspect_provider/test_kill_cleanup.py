"""A killed ``inspect eval`` leaves its sample's container; ``inspect sandbox cleanup proctor``
removes it, with its cgroups, mounts and counter files. The sweep keeps a live eval's container
(the other side), and removes a named one with ``cleanup proctor ID``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import docker
import pytest

from proctor.sandbox.docker import host_counters, labels
from tests.inspect_provider.test_inspect_eval import INSPECT, TASK, containers_of, inspect_env

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# Bounds of the polls below (each polls an observable condition, never sleeps blind).
START_DEADLINE_S = 300.0


def _until(condition: Any, what: str, deadline_s: float = START_DEADLINE_S) -> Any:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError(f"{what}: not within {deadline_s:.0f} s")


def _sample_started(container_id: str) -> bool:
    marker = subprocess.run(
        ["docker", "exec", container_id, "test", "-e", "/work/started"], capture_output=True
    )
    return marker.returncode == 0


def _traces(container_id: str, merged_dir: str | None) -> list[str]:
    """Everything of the container the host still holds: cgroups, mounts, counter files."""
    cgroups = [str(p) for p in Path("/sys/fs/cgroup").glob(f"*/docker/{container_id}*")]
    cgroups += [str(p) for p in Path("/sys/fs/cgroup").glob(f"*/*/docker-{container_id}*")]
    mounts = [
        line
        for line in Path("/proc/mounts").read_text().splitlines()
        if container_id in line or (merged_dir is not None and merged_dir in line)
    ]
    return cgroups + mounts


def _start_hanging_eval(tmp_path: Path) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    process = subprocess.Popen(
        [INSPECT, "eval", f"{TASK}@notes", "-T", "script=hang", "--sandbox", "proctor",
         "--log-dir", str(tmp_path / "logs"), "--display", "plain"],
        env=inspect_env(tmp_path),
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )  # fmt: skip
    started = _until(
        lambda: [c for c in containers_of(process.pid) if _sample_started(c["Id"])], "the sample's tool call"
    )
    assert len(started) == 1
    return process, started[0]


def test_cleanup_after_a_killed_eval_leaves_no_container_cgroup_or_mount(
    tmp_path: Path, sandbox_image: str
) -> None:
    process, container = _start_hanging_eval(tmp_path)
    container_id = container["Id"]
    client = docker.from_env()
    try:
        merged = client.api.inspect_container(container_id)["GraphDriver"]["Data"].get("MergedDir")
        assert _traces(container_id, merged), "the oracle sees the live container's cgroups and mounts"
        counters = list(host_counters.COUNTERS_ROOT.glob(f"{process.pid}-*"))
        assert counters, "the container's own counter files exist while it runs"

        # The other side first: a live eval's container is not the sweep's to remove.
        cleanup = subprocess.run(
            [INSPECT, "sandbox", "cleanup", "proctor"],
            env=inspect_env(tmp_path),
            capture_output=True,
            text=True,
        )
        assert cleanup.returncode == 0, cleanup.stdout + cleanup.stderr
        assert [c["Id"] for c in containers_of(process.pid)] == [container_id]

        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        # SIGKILL left the container running: nothing else removes it.
        assert [c["Id"] for c in containers_of(process.pid)] == [container_id]

        cleanup = subprocess.run(
            [INSPECT, "sandbox", "cleanup", "proctor"],
            env=inspect_env(tmp_path),
            capture_output=True,
            text=True,
        )
        assert cleanup.returncode == 0, cleanup.stdout + cleanup.stderr
        assert "removed" in cleanup.stdout
        assert containers_of(process.pid) == []
        assert _traces(container_id, merged) == []
        assert [p for p in counters if p.exists()] == []
    finally:
        if process.poll() is None:
            process.kill()
        for leftover in containers_of(process.pid):
            client.api.remove_container(leftover["Id"], force=True)
        client.close()


def test_cleanup_with_an_id_removes_that_container_of_a_live_eval(tmp_path: Path, sandbox_image: str) -> None:
    process, container = _start_hanging_eval(tmp_path)
    try:
        assert container["Labels"][labels.OWNER_PID] == str(process.pid)
        cleanup = subprocess.run(
            [INSPECT, "sandbox", "cleanup", "proctor", container["Id"][:12]],
            env=inspect_env(tmp_path),
            capture_output=True,
            text=True,
        )
        assert cleanup.returncode == 0, cleanup.stdout + cleanup.stderr
        assert "removed 1 sandbox container" in cleanup.stdout
        # That container is gone (the live eval may go on to start another for a retry).
        assert container["Id"] not in [c["Id"] for c in containers_of(process.pid)]
    finally:
        process.kill()
        process.wait()
        client = docker.from_env()
        for leftover in containers_of(process.pid):
            client.api.remove_container(leftover["Id"], force=True)
        client.close()
