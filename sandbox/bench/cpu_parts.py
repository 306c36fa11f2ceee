"""CPU per call by part, from process accounting: who spent a call's CPU, not just how much.

Whole-machine CPU (/proc/stat) includes everyone's work on a shared machine; these figures do
not. Each is the kernel's own accounting of one part, read before and after a round:

- ``controller``: this process (Proctor's Python: the pool, the relay, the SDK client), its own
  CPU time;
- ``engine``: the local engine's processes, dockerd and containerd with the children they have
  reaped (shims reparented to containerd, and the runc each shim runs), and any shim still alive;
  it includes other clients' work on the same engine; for ``docker exec`` the exec'd program is
  taken out of it (the long-lived container's shim reaps it, so it is in both figures: counted
  twice, the parts summed to 101 ms per ``print(1)`` where the machine spent 72);
- ``client``: the docker CLI processes of ``docker run`` and ``docker exec`` (this process reaped
  them);
- ``runtime``: on the runc-direct path, what this process reaped minus what ran inside the
  containers: ``runc run`` (and ``runc delete`` where still needed); on the docker paths runc is
  the shim's child, inside ``engine``;
- ``container``: every process of each container, from its own cgroup when the launcher's report
  arrives, split by the launcher's own accounting (sandbox/docker/containers.py, ``RawRun.cpu_us``) into
  ``init`` (runc init and docker-init, what the container's cgroup counted beyond the parts
  below), ``launcher``, ``prepare`` (the image's entrypoint) and ``program`` (the program and
  every descendant it waited for); a fresh docker container's group may be gone before its report
  is read, so ``init`` is averaged over the calls whose group was read;
- ``kernel``: the kernel's own threads (kworkers, ksoftirqd, RCU) machine-wide: the deferred
  work of tearing down namespaces, cgroups and mounts lands there, charged to no process; it
  includes what everyone else's work causes, so it is shown apart and compared within a run.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proctor.sandbox.docker.containers import container_cpu_us

PARTS = ("controller", "client", "engine", "runtime", "init", "launcher", "prepare", "program", "kernel")
# Container parts the launcher reports (RawRun.cpu_us); ``container`` is their cgroup's total.
LAUNCHER_PARTS = ("launcher", "prepare", "program")
_PROC = Path("/proc")
_DOCKERD_PIDFILE = Path("/var/run/docker.pid")
_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may hold spaces: fields start after the last ')'.
    return text[text.rfind(")") + 2 :].split()


def process_cpu_s(pid: int, children: bool = True) -> float:
    """utime + stime (and, with ``children``, cutime + cstime) of one process, in seconds."""
    fields = _stat_fields(pid)
    if fields is None:
        return 0.0
    # Fields after the name: state is [0], utime [11], stime [12], cutime [13], cstime [14].
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks * _TICK_S


def _parent(pid: int) -> int:
    fields = _stat_fields(pid)
    return int(fields[1]) if fields is not None else 0


_PF_KTHREAD = 0x00200000


def kernel_threads_cpu_s() -> dict[int, float]:
    """CPU of each kernel thread (the PF_KTHREAD flag in /proc/<pid>/stat), in seconds."""
    found: dict[int, float] = {}
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        # Fields after the name: flags is [6], utime [11], stime [12].
        if fields is not None and int(fields[6]) & _PF_KTHREAD:
            found[int(entry.name)] = (int(fields[11]) + int(fields[12])) * _TICK_S
    return found


def engine_processes() -> list[int]:
    """The main engine's dockerd (its pid file), its descendants, and every containerd shim
    serving it (a shim daemonizes: its parent is not the engine)."""
    try:
        dockerd = int(_DOCKERD_PIDFILE.read_text().strip())
    except (OSError, ValueError):
        return []
    found = {dockerd}
    parents: dict[int, int] = {}
    shims: list[int] = []
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        parents[pid] = _parent(pid)
        try:
            comm = (entry / "comm").read_text().strip()
        except OSError:
            continue
        if comm.startswith("containerd-shim"):
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            # The main engine's containerd lives under /var/run/docker (the gVisor engine's
            # under its own exec root): only shims addressing it are this engine's.
            if b"/var/run/docker/containerd/" in cmdline or b"/run/docker/containerd/" in cmdline:
                shims.append(pid)
    for pid in parents:
        chain, seen = pid, 0
        while chain > 1 and seen < 64:
            if chain == dockerd:
                found.add(pid)
                break
            chain, seen = parents.get(chain, 0), seen + 1
    return sorted(found | set(shims))


@dataclass
class Reading:
    """One reading of every accounted part, in seconds."""

    controller_s: float
    children_s: float
    engine: dict[int, float] = field(default_factory=dict)
    # Long-lived containers' own cgroups (docker exec's): what ran in them, program and all.
    containers_s: float = 0.0
    # Kernel workers come and go: per thread, so one that exits takes only its own figure away.
    kernel: dict[int, float] = field(default_factory=dict)

    @classmethod
    def now(cls, containers: Sequence[str] = ()) -> Reading:
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return cls(
            controller_s=time.process_time(),
            children_s=children.ru_utime + children.ru_stime,
            engine={pid: process_cpu_s(pid) for pid in engine_processes()},
            containers_s=sum((container_cpu_us(c) or 0) for c in containers) / 1e6,
            kernel=kernel_threads_cpu_s(),
        )


def engine_delta_s(before: Reading, after: Reading) -> float:
    """The engine's CPU between two readings. A process gone by the second reading adds
    nothing more than it had (a shim reaped by containerd shows up in containerd's children);
    one that appeared counts from zero."""
    return _grown(before.engine, after.engine)


def _grown(before: dict[int, float], after: dict[int, float]) -> float:
    return sum(after[pid] - before.get(pid, 0.0) for pid in after)


# What a reset container's launcher and cgroup had counted at its last call, by container ID:
# their counters run on across calls (the program's is per call), so a reused container adds
# only what grew since (per-sample; its own reset included).
Seen = dict[str, dict[str, int]]


@dataclass
class ContainerTally:
    """The launcher's and the cgroup's figures of the calls of one round (microseconds)."""

    seen: Seen = field(default_factory=dict)
    calls: int = 0
    reported: int = 0
    parts_us: dict[str, int] = field(default_factory=lambda: dict.fromkeys((*LAUNCHER_PARTS, "container"), 0))
    with_container: int = 0
    # The launcher parts of just the calls whose cgroup was read: on the docker path a fresh
    # container's group can be gone by the time the report is read (the launcher exits right
    # after it), so ``init`` is estimated over the calls that have both figures.
    inside_with_container_us: int = 0

    def add(self, extra: dict[str, Any]) -> None:
        self.calls += 1
        cpu = extra.get("cpu_us")
        if not isinstance(cpu, dict):
            return
        self.reported += 1
        totals = {part: int(value) for part, value in cpu.items()}
        key = extra.get("container_id")
        before = self.seen.get(str(key), {}) if key is not None else {}
        if key is not None:
            self.seen[str(key)] = totals
        inside = 0
        for part in LAUNCHER_PARTS:
            cumulative = part != "program"
            grown = totals.get(part, 0) - (before.get(part, 0) if cumulative else 0)
            self.parts_us[part] += grown
            inside += grown
        if "container" in totals:
            self.with_container += 1
            self.parts_us["container"] += totals["container"] - before.get("container", 0)
            self.inside_with_container_us += inside


def per_call_ms(
    before: Reading, after: Reading, calls: int, tally: ContainerTally | None
) -> dict[str, float | None]:
    """Each part's CPU per call in ms over one round; None for a part this way cannot show."""
    parts: dict[str, float | None] = dict.fromkeys(PARTS)
    parts["controller"] = (after.controller_s - before.controller_s) / calls * 1000
    parts["engine"] = engine_delta_s(before, after) / calls * 1000
    parts["kernel"] = _grown(before.kernel, after.kernel) / calls * 1000
    reaped_ms = (after.children_s - before.children_s) / calls * 1000
    if tally is None or tally.reported == 0:
        parts["client"] = reaped_ms
        if after.containers_s > before.containers_s:
            # docker exec: the program with runc exec's own start, in the long-lived container.
            program_ms = (after.containers_s - before.containers_s) / calls * 1000
            parts["program"] = program_ms
            # The exec'd process is the (live) shim's child: when it ends, the shim reaps it, so
            # the engine's figure holds the program's CPU too. Counted once, as the program.
            parts["engine"] = max(0.0, (parts["engine"] or 0.0) - program_ms)
        return parts
    for part in LAUNCHER_PARTS:
        parts[part] = tally.parts_us[part] / tally.reported / 1000
    if tally.with_container:
        container_ms = tally.parts_us["container"] / tally.with_container / 1000
        inside = tally.inside_with_container_us / tally.with_container / 1000
        parts["init"] = max(0.0, container_ms - inside)
        if reaped_ms > 0 and tally.with_container == tally.reported:
            # runc-direct: this process reaped ``runc run`` and, through it, the whole container
            # (its groups stay until it is removed, so every call has its figure).
            parts["runtime"] = max(0.0, reaped_ms - container_ms)
    return parts
