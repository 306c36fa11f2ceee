"""Per-container views of the host's counters, served by LXCFS, for containers under runc.

Under runc a container reads the host kernel's own ``/proc/meminfo``, ``/proc/stat``,
``/proc/uptime`` and CPU list. Those are shared by every concurrent call, so one call can signal
another, in another sample, by holding and releasing memory (``MemAvailable`` moved by 400 MB
in 3 s slots carried about 2 bits a minute between two calls), and a program sizes its thread
pools from the host's CPUs and memory rather than from its own limits.

LXCFS (Debian's ``lxcfs``, started by ``.ci/setup.sh``) is a FUSE file system that answers
each read from the reader's own cgroups: MemTotal is the container's memory limit, MemAvailable
its own headroom, the CPU list its quota (``--enable-cfs``), uptime its own. Its files are
bind-mounted read-only over the host's; runc allows exactly these destinations under /proc.

What this does not close (docs/sandbox.md, "Host counters"): ``/proc/vmstat``, ``/proc/zoneinfo``,
``/proc/buddyinfo``, ``/proc/pressure/*``, ``/sys/devices/system/node/*/meminfo`` and the
``intr``/``ctxt``/``procs_*`` lines of ``/proc/stat`` still show the host's; runc refuses mounts
over those paths. The audit row ``isolation.host_counters`` reports which ones a call can read.

Under runsc gVisor's kernel answers ``/proc`` itself from its own accounting, and a FUSE file
served through its gofer would be answered for the gofer's cgroup, not the program's: no binds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

LXCFS_ROOT = Path("/var/lib/lxcfs")
# Each file LXCFS serves, and where it goes in the container. runc accepts mounts under /proc
# only at these destinations (its list of "valid proc mounts"), which is LXCFS's list.
VIRTUALIZED = (
    "/proc/meminfo",
    "/proc/stat",
    "/proc/cpuinfo",
    "/proc/uptime",
    "/proc/loadavg",
    "/proc/diskstats",
    "/proc/swaps",
    "/proc/slabinfo",
    "/sys/devices/system/cpu/online",
)
# Host-wide counters no bind can cover under runc: what the audit checks a call can still read.
RESIDUAL = (
    "/proc/vmstat",
    "/proc/zoneinfo",
    "/proc/buddyinfo",
    "/proc/pressure/memory",
    "/proc/pressure/cpu",
    "/sys/devices/system/node/node0/meminfo",
)


def engine_is_local(api: Any) -> bool:
    """True for an engine reached through a local socket: its containers share this host's LXCFS.

    docker-py names every unix-socket engine ``http+docker://localhost``; TCP and SSH engines
    are other machines (or may be).
    """
    return str(getattr(api, "base_url", "")) == "http+docker://localhost"


def lxcfs_mounted(root: Path = LXCFS_ROOT) -> bool:
    """True when a live LXCFS serves ``root``: mounted, and its files answer a read.

    A mount whose daemon died answers ENOTCONN: binding it would hand every program a
    /proc/meminfo it cannot read, so a dead one counts as absent.
    """
    try:
        mounts = Path("/proc/self/mounts").read_text()
    except OSError:
        return False
    if not any(
        fields[1] == str(root) and fields[2] == "fuse.lxcfs"
        for fields in (line.split() for line in mounts.splitlines())
        if len(fields) >= 3
    ):
        return False
    try:
        (root / "proc" / "uptime").read_bytes()
    except OSError:
        return False
    return True


def lxcfs_binds(runtime_is_runc: bool, engine_is_local: bool, root: Path = LXCFS_ROOT) -> list[str]:
    """Docker ``binds`` for a sandbox container: LXCFS's files over the host's, read-only.

    Empty under runsc, for an engine on another machine (its host's LXCFS, if any, is not
    ours to see), and when LXCFS is not running here.
    """
    if not (runtime_is_runc and engine_is_local and lxcfs_mounted(root)):
        return []
    binds = []
    for target in VIRTUALIZED:
        source = root / target.lstrip("/")
        if source.exists():
            binds.append(f"{source}:{target}:ro")
    return binds


def describe_host_counters(runtime_is_runc: bool, engine_is_local: bool) -> dict[str, Any]:
    """What run.json records: which counters a call sees as its own, and which stay the host's."""
    binds = lxcfs_binds(runtime_is_runc, engine_is_local)
    if binds:
        return {
            "virtualized_by": "lxcfs",
            "virtualized": [bind.split(":")[1] for bind in binds],
            "host_wide": list(RESIDUAL),
        }
    if not runtime_is_runc:
        return {
            "virtualized_by": "gvisor",
            "why": "runsc answers /proc from gVisor's own accounting, not the host kernel's",
            "host_wide": [],
        }
    if not engine_is_local:
        why = "the engine is on another machine"
    else:
        why = f"LXCFS is not running at {LXCFS_ROOT} (.ci/setup.sh starts it)"
    return {"virtualized_by": None, "why": why, "host_wide": [*VIRTUALIZED, *RESIDUAL]}
