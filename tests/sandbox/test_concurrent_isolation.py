"""What concurrent samples share (docs/sandbox.md): runc-direct against the engine's own container.

Invariant: a program cannot tell whether it runs on runc-direct or on the engine path, except
through the differences docs/sandbox.md lists (:data:`LISTED_DIFFERENCES` here, each with its
reason), and no two concurrent calls share an inode of the image, a lock, an inotify watch or
/proc/locks. Oracle: the engine's own container, opened with Proctor's same settings. The same
probe programs run on both paths, alone and in concurrent pairs, and what they see is compared:
image files' device and inode numbers (distinct per container, not equal numbers), mountinfo
(normalised to mount point, file system type, read-only or not), /proc and /sys names, limits,
/proc/locks; and, through the audit's pair rows (agent/audit/pairs.py), whether a lock, an
inotify event or a /proc/locks line crosses from one call to the other. The local backend's
pairs are held to the same distinctness.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from proctor.agent.audit import pairs
from proctor.agent.audit.model import AuditContext, Verdict
from proctor.sandbox import Sandbox, SandboxUnavailable, open_sandbox
from proctor.sandbox.docker import oci_direct
from tests.sandbox.conftest import TEST_LIMITS

# Each with its reason; docs/sandbox.md ("What concurrent samples share") lists the same.
LISTED_DIFFERENCES: dict[str, str] = {}

VIEW = r"""
import json, os, resource, socket, sys
def ident(path):
    found = os.stat(path)
    return [found.st_dev, found.st_ino]
images = {}
IMAGE_FILES = (os.__file__, os.path.realpath(sys.executable), "/etc/os-release", "/usr/bin/env")
for path in IMAGE_FILES:
    if os.path.exists(path):
        images[os.path.realpath(path)] = ident(path)
mounts = []
for line in open("/proc/self/mountinfo"):
    before, _, after = line.partition(" - ")
    fields = before.split()
    options = set(fields[5].split(","))
    mounts.append(" ".join([fields[4], after.split()[0], "ro" if "ro" in options else "rw"]))
def names(path):
    try:
        return sorted(n for n in os.listdir(path) if not n.isdigit())
    except OSError as exc:
        return type(exc).__name__
RLIMITS = [name for name in dir(resource) if name.startswith("RLIMIT_")]
limits = {name: list(resource.getrlimit(getattr(resource, name))) for name in RLIMITS}
cgroup = {}
CGROUP_FILES = ("memory.max", "pids.max", "cpu.max")
CGROUP_FILES += ("memory/memory.limit_in_bytes", "pids/pids.max", "cpu/cpu.cfs_quota_us")
for path in CGROUP_FILES:
    try:
        cgroup[path] = open("/sys/fs/cgroup/" + path).read().strip()
    except OSError as exc:
        cgroup[path] = type(exc).__name__
meminfo_total = open("/proc/meminfo").readline().split()[:2]
print(json.dumps({
    "images": images,
    "root_dev": os.stat("/").st_dev,
    # Under the engine every layer is on one file system, so an image file has its directory's
    # device: an overlay stacked on another would give it a device of its own, and show.
    "image_devices_are_the_roots": sorted({ident[0] == os.stat("/").st_dev for ident in images.values()}),
    "mounts": sorted(mounts),
    "root": sorted([name, os.lstat("/" + name).st_mode] for name in os.listdir("/")),
    "sbin": names("/sbin"),
    "proc": names("/proc"),
    "sys": names("/sys"),
    "sys_cgroup": names("/sys/fs/cgroup"),
    "limits": limits,
    "cgroup": cgroup,
    "meminfo_total": meminfo_total,
    "cpus": [os.cpu_count(), len(os.sched_getaffinity(0))],
    # A fresh uid per container on both paths: whether it is root, not its number.
    "ids": [os.getuid() == 0, os.getgid(), os.getgroups()],
    "hostname_chars": len(socket.gethostname()),
    "cwd": os.getcwd(),
    "environment": sorted(os.environ),
    "proc_locks": open("/proc/locks").read(),
    # The host's pressure stall figures (PSI): masked whole, an empty directory, on both paths.
    "proc_pressure": os.listdir("/proc/pressure") if os.path.isdir("/proc/pressure") else None,
}))
"""

DIRECT_SERVES = pytest.mark.skipif(oci_direct.available() is not None, reason=str(oci_direct.available()))


async def _open(path: str, image: str) -> Sandbox:
    box = await open_sandbox(
        "docker",
        image=image,
        pool_size=0,
        default_limits=TEST_LIMITS,
        probe_libraries=False,
        engine_path=path,
    )
    assert box.describe()["engine_path"] == path
    return box


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def both_paths(sandbox_image: str) -> AsyncIterator[dict[str, Sandbox]]:
    opened = {path: await _open(path, sandbox_image) for path in ("docker", "runc-direct")}
    try:
        yield opened
    finally:
        for box in opened.values():
            await box.aclose()


async def _view(box: Sandbox) -> dict[str, Any]:
    result = await box.exec(VIEW, timeout=60)
    assert result.exit_code == 0, result.stderr[-2000:]
    view: dict[str, Any] = json.loads(result.stdout)
    return view


def _comparable(view: dict[str, Any]) -> dict[str, Any]:
    """What must be equal between the paths: all but the identities that must differ per container."""
    return {key: value for key, value in view.items() if key not in ("images", "root_dev")}


@pytest.mark.docker
@DIRECT_SERVES
@pytest.mark.asyncio(loop_scope="module")
async def test_runc_direct_shows_what_the_engines_container_shows(both_paths: dict[str, Sandbox]) -> None:
    engine, direct = [_comparable(await _view(both_paths[path])) for path in ("docker", "runc-direct")]
    differing = {key for key in engine if engine[key] != direct.get(key)}
    assert differing == set(LISTED_DIFFERENCES), {key: (engine[key], direct.get(key)) for key in differing}
    # /proc/locks shows nothing of the host's or another container's locks on either path.
    assert engine["proc_locks"] == direct["proc_locks"] == ""
    # /proc/pressure's host-wide CPU, memory and I/O stall counters are gone on both paths.
    assert engine["proc_pressure"] == direct["proc_pressure"] == []


def _shared_identities(first: dict[str, Any], second: dict[str, Any]) -> set[str]:
    """Image files that are the same (device, inode) in two containers' views."""
    assert first["images"], "the probe found no image file: the test proves nothing"
    return {path for path, ident in first["images"].items() if second["images"].get(path) == ident}


@pytest.mark.docker
@DIRECT_SERVES
@pytest.mark.asyncio(loop_scope="module")
async def test_no_two_concurrent_containers_share_an_image_inode_on_either_path(
    both_paths: dict[str, Sandbox],
) -> None:
    for path, box in both_paths.items():
        first, second = await asyncio.gather(_view(box), _view(box))
        assert _shared_identities(first, second) == set(), path
        assert first["root_dev"] != second["root_dev"], path


@pytest.mark.docker
@DIRECT_SERVES
@pytest.mark.asyncio(loop_scope="module")
async def test_no_lock_inotify_event_or_proc_locks_line_crosses_a_pair_on_either_path(
    both_paths: dict[str, Sandbox],
) -> None:
    verdicts: dict[str, dict[str, Verdict]] = {}
    for path, box in both_paths.items():
        ctx = AuditContext(sandbox=box, limits=box.default_limits, backend="docker")
        verdicts[path] = {}
        for row in ("pair.lock", "pair.inotify", "pair.proc_locks"):
            channel = next(c for c in pairs.CHANNELS if c.id == row)
            finding = await pairs.measure(ctx, channel)
            verdicts[path][row] = finding.verdict
    # The engine's container is the oracle; and both hold.
    assert verdicts["runc-direct"] == verdicts["docker"], verdicts
    assert set(verdicts["docker"].values()) == {Verdict.HELD}, verdicts


async def test_no_two_concurrent_local_calls_share_an_image_inode() -> None:
    box = await open_sandbox("local", default_limits=TEST_LIMITS, probe_libraries=False)
    try:
        first, second = await asyncio.gather(_view(box), _view(box))
    finally:
        await box.aclose()
    assert _shared_identities(first, second) == set()
    assert first["proc_locks"] == second["proc_locks"] == ""


# -- the mechanism, without an engine ----------------------------------------------------------


def _inotify_events_after(watch_dir: str, act: Callable[[], None]) -> int:
    import ctypes
    import os
    import struct

    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_NONBLOCK)
    assert fd >= 0 and libc.inotify_add_watch(fd, watch_dir.encode(), 0x1 | 0x20) >= 0
    try:
        act()
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return 0
        count, offset = 0, 0
        while offset + 16 <= len(data):
            count += 1
            offset += 16 + struct.unpack_from("iIII", data, offset)[3]
        return count
    finally:
        os.close(fd)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting an overlay needs root")
def test_two_overlays_of_the_same_layers_share_no_inode_lock_or_watch(tmp_path: Path) -> None:
    upper, lower = tmp_path / "upper", tmp_path / "lower"
    (lower / "lib").mkdir(parents=True)
    (lower / "lib" / "module.py").write_text("x = 1\n")
    upper.mkdir()
    mounts = [tmp_path / "a", tmp_path / "b"]
    for target in mounts:
        oci_direct.mount_overlay(target, (str(upper), str(lower)))
    try:
        files = [target / "lib" / "module.py" for target in mounts]
        stats = [path.stat() for path in files]
        assert (stats[0].st_dev, stats[0].st_ino) != (stats[1].st_dev, stats[1].st_ino)
        holder = os.open(files[0], os.O_RDONLY)
        try:
            fcntl.flock(holder, fcntl.LOCK_EX)
            # Through the same mount the lock is seen (the control): through the other, not.
            for path, seen in ((files[0], True), (files[1], False)):
                other = os.open(path, os.O_RDONLY)
                try:
                    with contextlib.suppress(BlockingIOError):
                        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        assert not seen, f"{path}: the lock held through the same mount was not seen"
                        continue
                    assert seen, f"{path}: a lock crossed into another overlay mount"
                finally:
                    os.close(other)
        finally:
            os.close(holder)
        watched = str(mounts[0] / "lib")
        assert _inotify_events_after(watched, lambda: files[0].read_bytes()) > 0  # the control
        assert _inotify_events_after(watched, lambda: files[1].read_bytes()) == 0
    finally:
        for target in mounts:
            assert oci_direct.unmount(target)


@pytest.mark.parametrize(
    "layers",
    [
        ("/a:b", "/c"),
        ("/a,upperdir=/x", "/c"),
        ("relative", "/c"),
        ("/a\\", "/c"),
        ("/a\nb", "/c"),
        ("/a",),
        (),
    ],
)
def test_layer_paths_overlayfs_would_misparse_are_refused(layers: tuple[str, ...]) -> None:
    with pytest.raises(SandboxUnavailable):
        oci_direct.overlay_options(layers)


def test_options_past_the_kernels_page_are_refused_with_the_count() -> None:
    layers = tuple(f"/var/lib/docker/overlay2/l/{n:026d}" for n in range(80))
    with pytest.raises(SandboxUnavailable, match="80 layers"):
        oci_direct.overlay_options(layers)
    assert oci_direct.overlay_options(layers[:20]).startswith(b"lowerdir=/var/lib/docker/overlay2/l/")


def test_every_host_path_bwrap_binds_when_staged_comes_from_a_per_call_overlay(tmp_path: Path) -> None:
    from proctor.sandbox.local import bwrap

    layout = bwrap.Layout.create(bwrap.interpreter_prefixes(sys.executable))
    try:
        argv = bwrap.bwrap_argv(
            "bwrap", layout, 1 << 20, ["true"], staged=True, seccomp_fd=9, python=sys.executable, backstop_s=5
        )
        stages = [layout.tree_stage(index) for index in range(len(layout.trees()))]
        sources = [
            argv[i + 1] for i, arg in enumerate(argv) if arg in ("--ro-bind", "--ro-bind-try", "--bind")
        ]
        assert sources, "bwrap binds nothing: the test proves nothing"
        outside = [s for s in sources if not any(s == st or s.startswith(st + "/") for st in stages)]
        assert outside == []
        # /proc/locks: the host's open-file-description locks, masked with /dev/null.
        index = argv.index("/proc/locks")
        assert argv[index - 2 : index] == ["--dev-bind", "/dev/null"] and argv.index("--proc") < index
    finally:
        layout.remove()


@pytest.mark.docker
def test_the_masked_paths_proctor_names_keep_every_one_the_engine_masks(sandbox_image: str) -> None:
    # A HostConfig that names masked paths replaces the engine's list: none of it may be lost.
    import docker

    from proctor.sandbox.docker.containers import ENGINE_MASKED_PATHS, PROCTOR_MASKED_PATHS

    api = docker.from_env().api
    spec = oci_direct.capture_spec(api, sandbox_image, {"command": ["sleep", "60"]})
    assert set(spec["linux"]["maskedPaths"]) <= set(ENGINE_MASKED_PATHS)
    assert "/proc/locks" in PROCTOR_MASKED_PATHS and "/proc/locks" not in spec["linux"]["maskedPaths"]
