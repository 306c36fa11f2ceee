"""Per-container views of the host's counters, rendered once from the container's own limits, under runc.

Under runc a container reads the host kernel's own ``/proc/meminfo``, ``/proc/stat``,
``/proc/uptime``, ``/proc/loadavg`` and CPU list. Those are shared by every concurrent call, so
one call can signal another, in another sample, by holding and releasing memory (``MemAvailable``
moved by 400 MB in 3 s slots carried about 2 bits a minute between two calls), and a program
sizes its thread pools from the host's CPUs and memory rather than from its own limits.

Each container gets files of its own instead, written on the host when the container starts and
bind-mounted read-only over the host's: MemTotal is the container's memory limit, the CPU list
and ``cpuinfo`` its CPU quota (rounded up), ``stat`` its CPUs with zero times and the host's boot
time (``psutil`` dates processes from it), ``loadavg`` one task of one, ``uptime`` the boot clock
when the container started. Nothing in them moves while the container runs: no other call can
move them, and no host process serves them.

Why files and not LXCFS (which served these until issue 41; docs/sandbox.md, "Host components
and what stays host-wide"): LXCFS is one FUSE daemon for the whole host, outside every limit.
Each file a program holds open cost it about 3.7 KB, so one call grew it from 3 to 279 MB
(charged to no container), a read storm raised every container's ``/proc`` read latency p99 from
30 to 468 ms, and its files are one inode for every container, so ``flock`` on
``/proc/meminfo`` carried bits between samples. A memory limit on the daemon would only turn the
hoarding attack into an outage of every container's ``/proc/meminfo``. What the rendered files
give up: ``MemFree``/``MemAvailable`` and the CPU times do not follow the container's own use (a
program reads its own cgroup for that), ``uptime`` does not advance.

What this does not close (the same section): ``/proc/vmstat``, ``/proc/zoneinfo``,
``/proc/buddyinfo``, ``/sys/devices/system/node/*/meminfo``; runc refuses mounts over those
paths (``/proc/pressure`` is masked whole: sandbox/docker/containers.py PROCTOR_MASKED_PATHS).
``sysinfo(2)`` answers from the kernel. The audit row
``proc.host_counters`` reports which ones a call can read; sandbox/bench/host_channels.py
measures what each carries between two calls.

Under runsc gVisor's kernel answers ``/proc`` itself from its own accounting: no binds.
"""

from __future__ import annotations

import functools
import math
import os
import re
import secrets
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proctor.sandbox.api import Limits

# Each file rendered, where it goes in the container, and its mode. runc accepts mounts under
# /proc only at these destinations (its list of "valid proc mounts").
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
    "/sys/devices/system/node/node0/meminfo",
)
# The host's own is readable by root only; so is ours.
_ROOT_ONLY = frozenset({"/proc/slabinfo"})
UPTIME = "/proc/uptime"


def file_name(destination: str) -> str:
    """The file's name in a container's counters directory: its destination, flattened."""
    return destination.strip("/").replace("/", "-")


def engine_is_local(api: Any) -> bool:
    """True for an engine reached through a local socket: it can bind files of this host.

    docker-py names every unix-socket engine ``http+docker://localhost``; TCP and SSH engines
    are other machines (or may be).
    """
    return str(getattr(api, "base_url", "")) == "http+docker://localhost"


# -- rendering ---------------------------------------------------------------------------------


@functools.cache
def _host_memtotal_kib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1])
    raise OSError("/proc/meminfo has no MemTotal line")


@functools.cache
def _host_cpuinfo_blocks() -> tuple[str, ...]:
    text = Path("/proc/cpuinfo").read_text()
    return tuple(block for block in text.split("\n\n") if block.strip())


@functools.cache
def _host_btime() -> int:
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("btime "):
            return int(line.split()[1])
    raise OSError("/proc/stat has no btime line")


def visible_cpus(limits: Limits) -> int:
    """CPUs a container sees: its quota rounded up (as LXCFS's ``--enable-cfs`` did), at least
    one, at most the host's."""
    return max(1, min(len(_host_cpuinfo_blocks()) or 1, math.ceil(limits.cpus)))


# meminfo's lines in the kernel's order; every one not named in _meminfo is 0. No line carries
# a host figure that moves: only the container's limit and two kernel constants.
_MEMINFO_KEYS = (
    "MemTotal",
    "MemFree",
    "MemAvailable",
    "Buffers",
    "Cached",
    "SwapCached",
    "Active",
    "Inactive",
    "Active(anon)",
    "Inactive(anon)",
    "Active(file)",
    "Inactive(file)",
    "Unevictable",
    "Mlocked",
    "SwapTotal",
    "SwapFree",
    "Dirty",
    "Writeback",
    "AnonPages",
    "Mapped",
    "Shmem",
    "KReclaimable",
    "Slab",
    "SReclaimable",
    "SUnreclaim",
    "KernelStack",
    "PageTables",
    "CommitLimit",
    "Committed_AS",
    "VmallocTotal",
    "VmallocUsed",
    "VmallocChunk",
    "Percpu",
    "AnonHugePages",
    "ShmemHugePages",
    "ShmemPmdMapped",
    "FileHugePages",
    "FilePmdMapped",
)
_HUGEPAGE_COUNTS = ("HugePages_Total", "HugePages_Free", "HugePages_Rsvd", "HugePages_Surp")


def _meminfo(limits: Limits) -> str:
    total = min(limits.memory_bytes // 1024, _host_memtotal_kib())
    values = dict.fromkeys(_MEMINFO_KEYS, 0)
    values.update(MemTotal=total, MemFree=total, MemAvailable=total, CommitLimit=total)
    values["VmallocTotal"] = 34359738367  # the kernel's constant on x86-64; no host figure
    lines = [f"{name + ':':<16}{value:>8} kB" for name, value in values.items()]
    lines += [f"{name + ':':<16}{0:>8}" for name in _HUGEPAGE_COUNTS]
    lines += [f"{'Hugepagesize:':<16}{2048:>8} kB", f"{'Hugetlb:':<16}{0:>8} kB"]
    return "\n".join(lines) + "\n"


def _cpuinfo(cpus: int) -> str:
    blocks = []
    for index, block in enumerate(_host_cpuinfo_blocks()[:cpus]):
        blocks.append(re.sub(r"(?m)^processor\s*:.*$", f"processor\t: {index}", block.strip("\n")))
    return "\n\n".join(blocks) + "\n\n"


def _stat(cpus: int) -> str:
    zeros = " ".join(["0"] * 10)
    lines = [f"cpu  {zeros}", *(f"cpu{index} {zeros}" for index in range(cpus))]
    lines += [
        "intr 0",
        "ctxt 0",
        f"btime {_host_btime()}",
        "processes 1",
        "procs_running 1",
        "procs_blocked 0",
        "softirq " + " ".join(["0"] * 11),
    ]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class CounterView:
    """The files of one limits configuration, ``/proc/uptime`` aside (rendered per container)."""

    files: tuple[tuple[str, bytes], ...]

    @classmethod
    def of(cls, limits: Limits) -> CounterView:
        cpus = visible_cpus(limits)
        rendered = {
            "/proc/meminfo": _meminfo(limits),
            "/proc/stat": _stat(cpus),
            "/proc/cpuinfo": _cpuinfo(cpus),
            "/proc/loadavg": "0.00 0.00 0.00 1/1 1\n",
            "/proc/diskstats": "",
            "/proc/swaps": "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n",
            "/proc/slabinfo": "slabinfo - version: 2.1\n",
            "/sys/devices/system/cpu/online": "0\n" if cpus == 1 else f"0-{cpus - 1}\n",
        }
        return cls(tuple((destination, text.encode()) for destination, text in rendered.items()))


def uptime_now() -> bytes:
    """``/proc/uptime`` as of now: the boot clock (which a program reads from ``CLOCK_BOOTTIME``
    anyway) and no idle time (the host's idle time moves with every other call's CPU use)."""
    return f"{time.clock_gettime(time.CLOCK_BOOTTIME):.2f} 0.00\n".encode()


def write_files(view: CounterView, directory: Path) -> None:
    """Write one container's files into ``directory`` (new): its own inodes, nobody else's."""
    directory.mkdir(mode=0o755)
    for destination, data in (*view.files, (UPTIME, uptime_now())):
        mode = 0o400 if destination in _ROOT_ONLY else 0o444
        fd = os.open(directory / file_name(destination), os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)


def binds(directory: Path) -> list[str]:
    """Docker ``binds`` of a container's files over the host's, read-only."""
    return [f"{directory / file_name(target)}:{target}:ro" for target in VIRTUALIZED]


# -- where the engine path's files live, and when they go --------------------------------------

# Per owner process and sandbox: ``OWNERPID-RUNID/TOKEN`` per container. runc-direct's containers
# keep theirs in their bundle (sandbox/docker/oci_direct.py) instead.
COUNTERS_ROOT = (
    Path("/run/proctor-counters")
    if os.geteuid() == 0
    else (
        Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()) / f"proctor-counters-{os.geteuid()}"
    )
)
OWNER_DIR = re.compile(r"(\d+)-([0-9a-f]{16})")
_BY_CONTAINER: dict[str, Path] = {}
_BY_CONTAINER_LOCK = threading.Lock()


def owner_directory(run_id: str) -> Path:
    return COUNTERS_ROOT / f"{os.getpid()}-{run_id}"


def new_container_directory(view: CounterView, run_id: str) -> Path:
    """A fresh directory of one engine-path container's files, under its owner's directory."""
    directory = owner_directory(run_id) / secrets.token_hex(8)
    directory.parent.mkdir(parents=True, exist_ok=True)
    write_files(view, directory)
    return directory


def adopt(container_id: str, directory: Path) -> None:
    """``directory`` now belongs to ``container_id``: removed with it (:func:`release`)."""
    with _BY_CONTAINER_LOCK:
        _BY_CONTAINER[container_id] = directory


def release(container_id: str) -> None:
    """Remove the files of a container that is gone (nothing when it had none here)."""
    with _BY_CONTAINER_LOCK:
        directory = _BY_CONTAINER.pop(container_id, None)
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)


def release_owner(run_id: str) -> None:
    """Remove a closing sandbox's directory: its containers are gone."""
    shutil.rmtree(owner_directory(run_id), ignore_errors=True)


def remove_dead_owners(pid_alive: Any) -> int:
    """Remove the directories of owner processes that are gone (``proctor sandbox cleanup`` and
    every command's sweep); returns how many went."""
    removed = 0
    if not COUNTERS_ROOT.is_dir():
        return 0
    for directory in COUNTERS_ROOT.iterdir():
        match = OWNER_DIR.fullmatch(directory.name)
        if match is not None and not pid_alive(int(match.group(1))):
            shutil.rmtree(directory, ignore_errors=True)
            removed += 1
    return removed


def describe_host_counters(runtime_is_runc: bool, engine_is_local: bool) -> dict[str, Any]:
    """What run.json records: which counters a call sees as its own, and which stay the host's."""
    if not runtime_is_runc:
        return {
            "virtualized_by": "gvisor",
            "why": "runsc answers /proc from gVisor's own accounting, not the host kernel's",
            "host_wide": [],
        }
    if not engine_is_local:
        return {
            "virtualized_by": None,
            "why": "the engine is on another machine: it cannot bind this host's files",
            "host_wide": [*VIRTUALIZED, *RESIDUAL],
        }
    return {
        "virtualized_by": "rendered",
        "why": "files of each container's own, rendered from its limits when it starts",
        "virtualized": list(VIRTUALIZED),
        "host_wide": list(RESIDUAL),
    }
