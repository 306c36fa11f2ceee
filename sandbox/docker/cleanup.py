"""Remove what crashed runs left behind: labelled containers, runc-direct containers (their
cgroups, bundles and image mounts) and local-backend cgroups.

A run removes its own containers even on errors, cancellation and Ctrl-C; only a controlling
process killed outright (SIGKILL, power loss) leaves some. By default only containers whose
owner process on this host is gone are removed, so cleaning up never disturbs a live run;
``everything=True`` removes every sandbox container on the engine.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import docker
from docker.errors import DockerException

from proctor.sandbox.docker import host_counters, labels, oci_direct
from proctor.sandbox.docker.containers import remove_container
from proctor.sandbox.docker.runtimes import known_engine_urls
from proctor.sandbox.local.backend import CGROUP_PARENT, CGROUP_ROOT, kill_cgroup_and_remove
from proctor.sandbox.local.bwrap import remove_stale_layouts


@dataclass
class CleanupReport:
    removed: list[str] = field(default_factory=list)
    kept_live: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    cgroups_removed: int = 0


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


def is_orphan(container_labels: dict[str, str]) -> bool:
    """True when the container's owner process on this host no longer exists.

    Containers owned by another host (a shared engine) are never orphans here: their owner's
    liveness cannot be checked from this machine.
    """
    if container_labels.get(labels.OWNER_HOST) != socket.gethostname():
        return False
    try:
        pid = int(container_labels.get(labels.OWNER_PID, ""))
    except ValueError:
        return True  # unreadable owner: nobody can be using it
    return not pid_alive(pid)


def cleanup_containers(client: docker.DockerClient, *, everything: bool = False) -> CleanupReport:
    report = CleanupReport()
    api = client.api
    for summary in api.containers(all=True, filters={"label": labels.LABEL_FILTER}):
        container_id: str = summary["Id"]
        if not everything and not is_orphan(summary.get("Labels") or {}):
            report.kept_live.append(container_id)
            continue
        try:
            remove_container(api, container_id)
        except DockerException:
            report.failed.append(container_id)
        else:
            report.removed.append(container_id)
    return report


def engine_clients() -> list[Callable[[int], docker.DockerClient]]:
    """Openers (by API timeout) of every engine Proctor may have put containers on: the
    environment's, and gVisor's separate engine when it is set up (sandbox/docker/runtimes.py)."""
    openers: list[Callable[[int], docker.DockerClient]] = [lambda timeout: docker.from_env(timeout=timeout)]
    for url in known_engine_urls()[1:]:
        openers.append(functools.partial(_client_at, url))
    return openers


def _client_at(url: str, timeout: int) -> docker.DockerClient:
    return docker.DockerClient(base_url=url, timeout=timeout)


def cleanup_other_engines(everything: bool) -> list[CleanupReport]:
    """:func:`cleanup_containers` on every engine beside the environment's that answers."""
    reports = []
    for url in known_engine_urls()[1:]:
        try:
            client = _client_at(url, 10)
            client.ping()
        except DockerException:
            continue
        try:
            reports.append(cleanup_containers(client, everything=everything))
        finally:
            client.close()
    return reports


# A call's deadline is at most a day (the CLI's bound); past that plus a margin, a running
# orphan can only be a launcher that was never given a program and never saw its stdin close.
_RUNNING_ORPHAN_MAX_AGE_S = 25 * 3600
_SWEEP_API_TIMEOUT_S = 3


def sweep_stopped_orphans(client: docker.DockerClient) -> list[str]:
    """Remove the containers of dead owners that have stopped (or are past any deadline).

    Cheap enough for every proctor command: one list request, usually nothing to remove. A
    running orphan is left alone: its launcher stops it by its deadline plus a grace, and the
    next sweep (or ``proctor sandbox cleanup``) removes it then. Except a template container
    (runc-direct takes the engine's spec from one per configuration, sandbox/docker/oci_direct.py): it
    never gets a program, so no deadline ever stops its launcher, which would wait for a request
    for a day; its owner is gone, so nobody will send one.
    """
    removed = []
    now = time.time()
    for summary in client.api.containers(all=True, filters={"label": labels.LABEL_FILTER}):
        running = summary.get("State") == "running"
        young = now - float(summary.get("Created") or now) < _RUNNING_ORPHAN_MAX_AGE_S
        template = (summary.get("Labels") or {}).get(labels.ROLE) == "template"
        if running and young and not template:
            continue
        if not is_orphan(summary.get("Labels") or {}):
            continue
        with contextlib.suppress(DockerException):
            remove_container(client.api, summary["Id"])
            removed.append(summary["Id"])
    return removed


def cleanup_direct(*, everything: bool = False, only_stopped: bool = False) -> CleanupReport:
    """runc-direct's leftovers (sandbox/docker/oci_direct.py): containers of dead owners on this host
    (every one with ``everything``), then groups no container holds, then the bundles and image
    mounts of owners that are gone. ``only_stopped`` leaves running containers to their
    launcher's backstop, as :func:`sweep_stopped_orphans` does. A live owner's image mounts stay
    even with ``everything``: its next containers need them."""
    report = CleanupReport()
    names = sorted(p.name for p in oci_direct.RUNC_ROOT.glob("*") if oci_direct.is_direct(p.name))
    for name in names:
        if not everything and pid_alive(_direct_owner(name)):
            report.kept_live.append(name)
            continue
        if only_stopped and oci_direct.state(name) == "running":
            continue
        oci_direct.remove(name)
        if (oci_direct.RUNC_ROOT / name).exists():
            report.failed.append(name)
        else:
            report.removed.append(name)
    for group in oci_direct.CGROUP_ROOT.glob(f"*/{oci_direct.CGROUP_PARENT}/*"):
        name = group.name
        if not oci_direct.is_direct(name) or (oci_direct.RUNC_ROOT / name).exists():
            continue
        if not everything and pid_alive(_direct_owner(name)):
            continue
        if kill_cgroup_and_remove(group, time.monotonic() + 5.0):
            report.cgroups_removed += 1
    for directory in oci_direct.STATE_ROOT.glob("*"):
        match = oci_direct.OWNER_DIR.fullmatch(directory.name)
        if match is not None and not pid_alive(int(match.group(1))):
            oci_direct.release_directory(directory)
    host_counters.remove_dead_owners(pid_alive)
    return report


def _direct_owner(name: str) -> int:
    match = oci_direct.NAME.fullmatch(name)
    return int(match.group(1)) if match is not None else 0


class BackgroundSweep:
    """``sweep_stopped_orphans`` on a daemon thread, silent when no engine answers."""

    def __init__(self) -> None:
        self.removed: list[str] = []
        self._thread = threading.Thread(target=self._run, name="proctor-sweep", daemon=True)

    def start(self) -> BackgroundSweep:
        self._thread.start()
        return self

    def _run(self) -> None:
        with contextlib.suppress(OSError):  # the engine path's counter files of dead owners
            host_counters.remove_dead_owners(pid_alive)
        if oci_direct.RUNC_ROOT.is_dir():
            with contextlib.suppress(Exception):  # best effort: not root, a slow runc
                self.removed += cleanup_direct(only_stopped=True).removed
        # Every engine a sandbox may have used: the default one and gVisor's (sandbox/docker/runtimes.py).
        for client_for in engine_clients():
            try:
                client = client_for(_SWEEP_API_TIMEOUT_S)
                try:
                    self.removed += sweep_stopped_orphans(client)
                finally:
                    client.close()
            except Exception:  # best effort: no engine, no permission, a slow engine
                continue

    def join(self, timeout: float) -> list[str]:
        """What was removed, once done or ``timeout`` seconds from now, whichever comes first."""
        self._thread.join(timeout)
        return list(self.removed)


_background: BackgroundSweep | None = None


def start_background_sweep() -> BackgroundSweep:
    """Start this process's one sweep (at most one per process)."""
    global _background
    if _background is None:
        _background = BackgroundSweep().start()
    return _background


def background_sweep_result(timeout: float) -> list[str]:
    """What this process's sweep removed (waiting up to ``timeout``); [] when none ran."""
    return _background.join(timeout) if _background is not None else []


def cleanup_local_cgroups(*, everything: bool = False) -> int:
    """Kill and remove per-call cgroups of dead local-backend owners; returns how many went."""
    removed = 0
    for controller in ("pids", "memory", "cpu", "cpuacct"):
        parent = CGROUP_ROOT / controller / CGROUP_PARENT
        if not parent.is_dir():
            continue
        for group in parent.glob("call-*"):
            if not everything and pid_alive(_owner_pid(group)):
                continue
            if kill_cgroup_and_remove(group, time.monotonic() + 5.0):
                removed += 1
    # The small per-sandbox directories (synthetic /etc/passwd, staging points) of dead owners.
    remove_stale_layouts(pid_alive)
    return removed


def _owner_pid(group: Path) -> int:
    # Named call-<owner pid>-<random>, see local_backend.CallCgroups.
    try:
        return int(group.name.split("-")[1])
    except (IndexError, ValueError):
        return 0
