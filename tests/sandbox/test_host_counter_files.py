"""The host-counter files each container gets (sandbox/docker/host_counters.py), without an engine.

Invariant: what a container reads in ``/proc/meminfo``, ``/proc/stat``, its CPU list... is a
function of its own limits (and, for ``/proc/uptime``, of when it started), never of what any
other call does; and each container's files are inodes of its own. The oracle for the figures is
the limits themselves, parsed back the way ``psutil`` and glibc read these files.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.sandbox.api import Limits
from proctor.sandbox.docker import host_counters, oci_direct
from proctor.sandbox.docker.host_counters import VIRTUALIZED, CounterView, file_name

MIB = 1024 * 1024
limits_strategy = st.builds(
    Limits,
    memory_bytes=st.integers(64 * MIB, 64 * 1024 * MIB),
    cpus=st.floats(0.1, 64.0, allow_nan=False),
)


def meminfo_fields(data: bytes) -> dict[str, int]:
    """``/proc/meminfo`` as psutil reads it: ``Name: value [kB]`` per line."""
    fields = {}
    for line in data.decode().splitlines():
        name, _, rest = line.partition(":")
        fields[name] = int(rest.split()[0])
    return fields


def online_cpus(data: bytes) -> int:
    """The CPU count glibc's sysconf(_SC_NPROCESSORS_ONLN) derives from a list like ``0-3``."""
    count = 0
    for part in data.decode().strip().split(","):
        low, _, high = part.partition("-")
        count += int(high or low) - int(low) + 1
    return count


@settings(max_examples=25, deadline=None)
@given(limits=limits_strategy)
def test_every_figure_is_the_containers_own_limit(limits: Limits) -> None:
    files = dict(CounterView.of(limits).files)
    host_total_kib = meminfo_fields(Path("/proc/meminfo").read_bytes())["MemTotal"]
    host_cpus = os.cpu_count() or 1
    memory = meminfo_fields(files["/proc/meminfo"])
    assert memory["MemTotal"] == min(limits.memory_bytes // 1024, host_total_kib)
    assert memory["MemAvailable"] == memory["MemFree"] == memory["MemTotal"]
    assert memory["SwapTotal"] == 0
    cpus = max(1, min(host_cpus, math.ceil(limits.cpus)))
    assert online_cpus(files["/sys/devices/system/cpu/online"]) == cpus
    assert files["/proc/cpuinfo"].decode().count("processor\t:") == cpus
    stat_lines = files["/proc/stat"].decode().splitlines()
    assert sum(line.startswith("cpu") for line in stat_lines) == cpus + 1
    # psutil dates processes by the host's boot time plus their start ticks: it must be the host's.
    host_btime = next(
        line for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime")
    )
    assert host_btime in stat_lines
    assert files["/proc/loadavg"] == b"0.00 0.00 0.00 1/1 1\n"


def test_no_figure_moves_with_what_other_processes_do() -> None:
    """Rendered, then the host's memory, task count and shared memory moved, then rendered again:
    the same bytes (on the host's own files these lines all moved)."""
    limits = Limits(memory_bytes=1024 * MIB, cpus=1.0)
    first = CounterView.of(limits)
    block = b"\x01" * (256 * MIB)
    children = [subprocess.Popen(["sleep", "5"]) for _ in range(16)]
    try:
        second = CounterView.of(limits)
    finally:
        for child in children:
            child.kill()
            child.wait()
        del block
    assert first == second


def test_each_container_gets_inodes_of_its_own(tmp_path: Path) -> None:
    """Two containers' files are never one inode: a lock or watch on one is not on the other
    (LXCFS served one inode to every container)."""
    view = CounterView.of(Limits())
    host_counters.write_files(view, tmp_path / "a")
    host_counters.write_files(view, tmp_path / "b")
    for destination in VIRTUALIZED:
        first, second = (tmp_path / side / file_name(destination) for side in ("a", "b"))
        assert first.read_bytes() == second.read_bytes() or destination == "/proc/uptime"
        assert first.stat().st_ino != second.stat().st_ino
        # The host's slabinfo is root's only; so is ours.
        expected = 0o400 if destination == "/proc/slabinfo" else 0o444
        assert first.stat().st_mode & 0o777 == expected
    assert sorted(bind.split(":")[1] for bind in host_counters.binds(tmp_path / "a")) == sorted(VIRTUALIZED)


def _spec_with_counter_binds(uid: int) -> dict[str, object]:
    return {
        "process": {"args": ["python3", "-c", "L", f'{{"uid": {uid}}}']},
        "mounts": [
            {"destination": "/etc/hostname", "type": "bind", "source": "/x/hostname"},
            *(
                {
                    "destination": target,
                    "type": "bind",
                    "source": f"/run/proctor-counters/t/{file_name(target)}",
                }
                for target in VIRTUALIZED
            ),
        ],
        "linux": {},
    }


@settings(max_examples=10, deadline=None)
@given(token=st.text("0123456789abcdef", min_size=12, max_size=12))
def test_runc_direct_binds_each_containers_own_files_from_its_bundle(token: str) -> None:
    template = oci_direct.Template(_spec_with_counter_binds(5), 5, ("/r",), counters=CounterView.of(Limits()))
    name = f"proctor-oci-1-0123456789abcdef-{token}"
    bundle = Path(f"/run/proctor-oci/1-x/bundles/{name}")
    spec = oci_direct.call_spec(template, name, 6, bundle)
    sources = {mount["destination"]: mount["source"] for mount in spec["mounts"]}
    for target in VIRTUALIZED:
        assert sources[target] == f"{bundle}/counters/{file_name(target)}"
    assert sources["/etc/hostname"] == f"{bundle}/hostname"
    # The text rendered once per template gives the same spec.
    assert json.loads(oci_direct.call_spec_text(template, name, 6, bundle)) == spec


def test_the_sweep_removes_dead_owners_counter_files_and_keeps_live_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(host_counters, "COUNTERS_ROOT", tmp_path)
    finished = subprocess.Popen(["true"])
    finished.wait()
    dead = tmp_path / f"{finished.pid}-0123456789abcdef"
    live = tmp_path / f"{os.getpid()}-0123456789abcdef"
    stranger = tmp_path / "not-an-owner"
    for directory in (dead, live, stranger):
        (directory / "c").mkdir(parents=True)
    from proctor.sandbox.docker.cleanup import pid_alive

    assert host_counters.remove_dead_owners(pid_alive) == 1
    assert not dead.exists() and live.exists() and stranger.exists()


def test_a_removed_container_takes_its_files_with_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host_counters, "COUNTERS_ROOT", tmp_path)
    directory = host_counters.new_container_directory(CounterView.of(Limits()), "0123456789abcdef")
    host_counters.adopt("c1", directory)
    other = host_counters.new_container_directory(CounterView.of(Limits()), "0123456789abcdef")
    host_counters.adopt("c2", other)
    host_counters.release("c1")
    host_counters.release("never-adopted")
    assert not directory.exists() and other.exists()
    host_counters.release_owner("0123456789abcdef")
    assert not other.exists()
