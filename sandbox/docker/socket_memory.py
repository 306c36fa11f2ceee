"""A bound on the socket buffers of one call, which cgroup v1's memory limit does not see.

Under cgroup v1 the memory controller charges a socket's buffers to the group only once the
group's TCP limit (``memory.kmem.tcp.limit_in_bytes``) has been written; until then they are
charged to no group at all. A program with loopback TCP only (a server and clients of its own)
could so queue gigabytes nobody counted: measured here, 60 connection pairs held 955 MiB of
send buffers while the container's memory group showed 11 MiB. And the kernel's TCP memory
(``net.ipv4.tcp_mem``, 2.2 GiB here) is one pool for the whole host, every network namespace
included: a call at that bound leaves every TCP socket of the host (other calls, Ray, the
engine's clients) under memory pressure. Writing the limit makes the group count its sockets'
buffers (every protocol that charges socket memory: TCP, UDP) and stop them there.

Under cgroup v2 socket memory is always charged to the memory limit; there is nothing to do.
"""

from __future__ import annotations

from pathlib import Path

from proctor.sandbox.api import MIB

# Far more than a computation's own loopback traffic needs; small against its memory limit.
SOCKET_BUFFER_BYTES = 32 * MIB
TCP_LIMIT_FILE = "memory.kmem.tcp.limit_in_bytes"
CGROUP_V1_MEMORY = Path("/sys/fs/cgroup/memory")


def limit_group(directory: Path, limit: int = SOCKET_BUFFER_BYTES) -> None:
    """Bound (and thereby start counting) the socket buffers of the cgroup v1 memory group
    ``directory``. Before any socket of the group exists: earlier ones are never counted."""
    (directory / TCP_LIMIT_FILE).write_text(str(limit))


def memory_group_of(pid: int, proc: Path = Path("/proc")) -> Path | None:
    """The cgroup v1 memory group of ``pid`` on this host; None under cgroup v2, or when the
    process is not visible here."""
    try:
        lines = (proc / str(pid) / "cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return CGROUP_V1_MEMORY / path.lstrip("/")
    return None


def limit_container(
    pid: int, container_id: str, limit: int = SOCKET_BUFFER_BYTES, proc: Path = Path("/proc")
) -> bool:
    """Bound the socket buffers of the container whose first process is ``pid``, when its engine
    runs on this host under cgroup v1. Returns whether a limit was written.

    The group must name the container: a pid read from an engine on another host may be some
    unrelated process here. An OSError means the group exists and refused the limit.
    """
    group = memory_group_of(pid, proc)
    if group is None or container_id not in group.name or not group.is_dir():
        return False
    limit_group(group, limit)
    return True
