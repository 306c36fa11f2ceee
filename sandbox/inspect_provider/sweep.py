"""``inspect sandbox cleanup proctor [ID]``: what a killed eval left, through Proctor's sweep.

A sample's container carries Proctor's labels (owner pid and host, run id; sandbox/docker/labels.py),
so the sweep ``proctor sandbox cleanup`` runs finds it like any other: on every engine Proctor
may use (the default and gVisor's), the containers whose owner process is gone, with their
cgroups and mounts (the engine removes those with the container), the per-container counter
files of dead owners, and runc-direct's and the local backend's leftovers from
``isolation: fresh``. A live eval's containers stay. With an ID, that one container goes,
whoever owns it, provided it is Proctor's (it carries the ``proctor.sandbox`` label).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import docker
from docker.errors import DockerException, NotFound

from proctor.sandbox.docker import labels
from proctor.sandbox.docker.cleanup import (
    cleanup_containers,
    cleanup_direct,
    cleanup_local_cgroups,
    engine_clients,
)
from proctor.sandbox.docker.containers import remove_container

_API_TIMEOUT_S = 30


@dataclass
class SweepReport:
    removed: list[str] = field(default_factory=list)
    kept_live: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    cgroups_removed: int = 0
    unknown: list[str] = field(default_factory=list)

    def summary(self) -> str:
        line = f"proctor: removed {len(self.removed)} sandbox container(s)"
        if self.kept_live:
            line += f"; kept {len(self.kept_live)} of live evals"
        if self.failed:
            line += f"; could not remove {', '.join(c[:12] for c in self.failed)}"
        if self.unknown:
            line += f"; no proctor sandbox container {', '.join(self.unknown)}"
        return line


def sweep(container_id: str | None = None) -> SweepReport:
    """Remove the orphans of every engine, or the one container ``container_id`` names."""
    report = SweepReport()
    clients = []
    for client_for in engine_clients():
        try:
            client = client_for(_API_TIMEOUT_S)
            client.ping()
        except DockerException:
            continue
        clients.append(client)
    try:
        if container_id is not None:
            _remove_one(clients, container_id, report)
            return report
        for client in clients:
            found = cleanup_containers(client)
            report.removed += found.removed
            report.kept_live += found.kept_live
            report.failed += found.failed
    finally:
        for client in clients:
            client.close()
    direct = cleanup_direct()
    report.removed += direct.removed
    report.failed += direct.failed
    report.cgroups_removed = cleanup_local_cgroups() + direct.cgroups_removed
    return report


def _remove_one(clients: list[docker.DockerClient], container_id: str, report: SweepReport) -> None:
    for client in clients:
        try:
            attrs = client.api.inspect_container(container_id)
        except NotFound:
            continue
        except DockerException:
            report.failed.append(container_id)
            return
        if (attrs.get("Config", {}).get("Labels") or {}).get(labels.SANDBOX) != "1":
            break  # someone else's container: never ours to remove
        try:
            remove_container(client.api, attrs["Id"])
        except DockerException:
            report.failed.append(container_id)
        else:
            report.removed.append(attrs["Id"])
        return
    report.unknown.append(container_id)
