"""runc-direct: each fresh container started by the OCI runtime itself, from the engine's own spec.

Docker keeps the images and still generates the spec: once per image and configuration a
container with Proctor's exact settings (sandbox/docker/containers.py ``container_settings``) is
created and started, the OCI spec the engine wrote into its bundle directory
(``config.json``) is read, and that container is removed. Every call then gets, from that
spec: a fresh container name, a fresh cgroup path, fresh namespaces (the spec names none to
join) and fresh tmpfs mounts (the spec's own), started by ``runc run``. What changes per call,
and nothing else:

- the program's uid (a fresh one per container, as on the docker path) in the launcher's
  configuration and in the tmpfs mounts' ``uid=`` options;
- the root: the image's layers, mounted read-only for this container alone (an overlay of the
  layers the engine keeps, under a layer of Proctor's own holding only the mount points the spec
  needs). One overlay mount per container, as the engine's: overlayfs gives each mount its own
  inodes, so no two containers share an inode of the image, and a lock (flock, POSIX, OFD) or an
  inotify watch on an image file never reaches another container (``What concurrent samples
  share`` in docs/sandbox.md; tests/sandbox/test_concurrent_isolation.py);
- the hostname, and the ``/etc/hostname`` file, per container (the engine's are per container);
- the sources of the host-counter files (``/proc/meminfo``...): each container's own, written
  into its bundle from the template's limits (sandbox/docker/host_counters.py), as the engine path's are;
- the cgroup path (``/proctor-oci/NAME`` in every hierarchy);
- hooks removed (network ``none`` needs none; the engine's would call back into dockerd);
- where the template's filter was recorded (sandbox/docker/seccomp_once.py): the seccomp profile taken
  out of the spec and the process run through the seccomp helper, which installs the filter runc
  itself installed for this spec, read back and proved once per template, then execs the same
  arguments;

and, as on the docker path, the memory group's socket-buffer bound is written once the launcher
waits, before any program runs (sandbox/docker/socket_memory.py): runc 1.1 ignores the spec's
``kernelTCP``, measured by ``test_socket_buffers_are_bounded_by_the_call_not_by_the_hosts_shared_pool``.

Seccomp (as the profile, or as the filter runc compiled from it), capabilities, masked and
read-only paths, rlimits, the host-counter binds (each container's own files), memory, pids and
CPU limits are the engine's bytes. Every
container, bundle, cgroup and mount is named ``proctor-oci-OWNERPID-RUNID-TOKEN`` or lives under
``/run/proctor-oci/OWNERPID-RUNID``, so ``proctor sandbox cleanup`` and each command's sweep
find what a killed controller left (sandbox/docker/cleanup.py). runc's own state lives under its own
root (``/run/proctor-oci/runc``), never the engine's.

All functions here block; callers run them in worker threads.
"""

from __future__ import annotations

import contextlib
import copy
import ctypes
import ctypes.util
import functools
import hashlib
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import docker

from proctor.sandbox.api import SandboxError, SandboxUnavailable
from proctor.sandbox.docker import host_counters, prepare_once, seccomp_once
from proctor.sandbox.docker.runc_spawn import RuncProcess

STATE_ROOT = Path("/run/proctor-oci")
RUNC_ROOT = STATE_ROOT / "runc"
# The seccomp helper, built once per source version (sandbox/docker/seccomp_once.py); shared by owners.
HELPERS_DIR = STATE_ROOT / "helpers"
CGROUP_ROOT = Path("/sys/fs/cgroup")
CGROUP_PARENT = "proctor-oci"
NAME_PREFIX = "proctor-oci-"
NAME = re.compile(r"proctor-oci-(\d+)-([0-9a-f]{16})-([0-9a-f]{12})")
OWNER_DIR = re.compile(r"(\d+)-([0-9a-f]{16})")
# Where an engine keeps its running containers' bundles: dockerd's own containerd, then a
# system containerd (namespace moby either way).
BUNDLE_DIRS = (
    Path("/run/docker/containerd/daemon/io.containerd.runtime.v2.task/moby"),
    Path("/run/containerd/io.containerd.runtime.v2.task/moby"),
)
# Mount destinations inside file systems runc mounts itself: their mount points exist there.
_RUNTIME_TREES = ("/proc", "/sys", "/dev")
_RUNC_TIMEOUT_S = 30.0
# How long a container whose launcher has reported (and so exits by itself) gets to end before
# it is forced: forcing it starts ``runc delete`` and kills the container's init before
# ``runc run`` reaps it, so the call's CPU would vanish from the controller's accounting.
_REPORTED_EXIT_GRACE_S = 2.0
_STREAM_STDOUT, _STREAM_STDERR = 1, 2


def runc_binary() -> str | None:
    return shutil.which("runc")


def available() -> str | None:
    """Why this path cannot serve here, or None when it can (root, runc, cgroup v1 or v2)."""
    if os.geteuid() != 0:
        return "runc-direct needs root on the engine's host (it starts containers itself)"
    if runc_binary() is None:
        return "runc-direct needs the runc binary on PATH"
    return None


# -- the spec, once per image and configuration ----------------------------------------------------


def capture_spec(api: docker.APIClient, image_id: str, settings: dict[str, Any]) -> dict[str, Any]:
    """Create and start one container with ``settings`` and return the OCI spec the engine wrote
    for it; the container is removed whatever happens."""
    from proctor.sandbox.docker.containers import remove_container

    created = api.create_container(image_id, **settings)
    container_id: str = created["Id"]
    try:
        api.start(container_id)
        for base in BUNDLE_DIRS:
            path = base / container_id / "config.json"
            if path.is_file():
                spec: dict[str, Any] = json.loads(path.read_text())
                return spec
        raise SandboxUnavailable(
            "runc-direct: the engine's bundle directory was not found (looked under "
            + ", ".join(str(b) for b in BUNDLE_DIRS)
            + "); the engine is not local, or keeps its bundles elsewhere"
        )
    finally:
        remove_container(api, container_id)


def rewrite_uid(spec: dict[str, Any], old: int, new: int) -> None:
    """Give a spec generated for program uid ``old`` to ``new``: the launcher's configuration
    (its last argument, JSON) and the ``uid=`` option of every tmpfs mount; nothing else."""
    args = spec["process"]["args"]
    config = json.loads(args[-1])
    if config.get("uid") != old:
        raise SandboxError("runc-direct: the spec's launcher configuration is not the one generated")
    config["uid"] = new
    args[-1] = json.dumps(config)
    for mount in spec.get("mounts", []):
        if mount.get("type") == "tmpfs":
            options = mount.get("options", [])
            mount["options"] = [f"uid={new}" if opt == f"uid={old}" else opt for opt in options]


# -- the root file system, once per image ------------------------------------------------------


def _overlay_lowers(api: docker.APIClient, image_id: str) -> list[str]:
    """The image's layer directories, top first, through the engine's own short ``l/`` links
    (they keep the mount options of an image's dozens of layers under a page)."""
    driver = api.inspect_image(image_id).get("GraphDriver") or {}
    if driver.get("Name") != "overlay2":
        raise SandboxUnavailable(f"runc-direct needs the overlay2 storage driver, not {driver.get('Name')!r}")
    data = driver.get("Data") or {}
    layers = [data.get("UpperDir") or "", *(data.get("LowerDir") or "").split(":")]
    dirs = [Path(layer) for layer in layers if layer]
    if not dirs:
        raise SandboxUnavailable("runc-direct: the image has no layers the engine names")
    base = dirs[0].parent.parent
    lowers = []
    for layer in dirs:
        link = layer.parent / "link"
        lowers.append(str(base / "l" / link.read_text().strip()) if link.is_file() else str(layer))
    return lowers


# A mount's options are copied in one page; the separators overlayfs parses must not be in a path.
_OPTIONS_MAX = 4095
_OVERLAY_UNSAFE = re.compile(r"[:,\\\n]")
_MS_RDONLY = 0x1
_MNT_DETACH = 0x2
_EINVAL = 22


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def overlay_options(lowers: tuple[str, ...] | list[str]) -> bytes:
    """The read-only overlay's options for ``lowers`` (top first), or SandboxUnavailable naming
    why they cannot be written (a separator in a path, more than a page)."""
    if len(lowers) < 2:
        # A read-only overlay needs two lower layers, and refuses one named twice (ELOOP).
        raise SandboxUnavailable(f"runc-direct: a read-only overlay needs two layers, not {len(lowers)}")
    for lower in lowers:
        if not lower.startswith("/") or _OVERLAY_UNSAFE.search(lower):
            raise SandboxUnavailable(f"runc-direct: a layer path overlayfs cannot parse: {lower!r}")
    options = ("lowerdir=" + ":".join(lowers)).encode()
    if len(options) > _OPTIONS_MAX:
        raise SandboxUnavailable(
            f"runc-direct: the image's {len(lowers)} layers need {len(options)} bytes of mount options, "
            f"more than the kernel's page of {_OPTIONS_MAX + 1}"
        )
    return options


def mount_overlay(target: Path, lowers: tuple[str, ...] | list[str]) -> None:
    """A new read-only overlay of ``lowers`` at ``target``: a superblock, and so inodes, of its own."""
    options = overlay_options(lowers)
    target.mkdir(parents=True, exist_ok=True)
    if _libc().mount(b"overlay", str(target).encode(), b"overlay", _MS_RDONLY, options) != 0:
        errno = ctypes.get_errno()
        raise SandboxError(f"runc-direct: mounting the image at {target} failed: {os.strerror(errno)}")


def unmount(target: Path) -> bool:
    """Detach the mount at ``target``; True when nothing is mounted there any more."""
    if _libc().umount2(str(target).encode(), _MNT_DETACH) == 0:
        return True
    return ctypes.get_errno() in (_EINVAL, 2)  # not a mount point, or no such path


def root_layers(
    api: docker.APIClient, image_id: str, spec: dict[str, Any], directory: Path
) -> tuple[str, ...]:
    """The layers every container of this image mounts as its own read-only root, top first: a
    layer of Proctor's own that holds every mount point the spec needs and the image lacks (the
    engine's init layer did), over the image's layers."""
    lowers = _overlay_lowers(api, image_id)
    layer = directory / "mountpoints"
    layer.mkdir(parents=True, exist_ok=True)
    # The image as merged, to see which mount points it lacks: one layer is its own view.
    view = directory / "view" if len(lowers) > 1 else Path(lowers[0])
    if len(lowers) > 1:
        mount_overlay(view, lowers)
    try:
        for mount in spec.get("mounts", []):
            destination = str(mount.get("destination", ""))
            if any(destination == tree or destination.startswith(tree + "/") for tree in _RUNTIME_TREES):
                continue
            if destination in ("/proc", "/sys", "/dev"):
                continue
            # As runc resolves it: through the image's own links (/sbin is usr/sbin in a
            # merged-/usr image), so a mount point never shadows a link with a directory.
            relative = str(resolve_within(view, destination))
            if relative == "." or os.path.lexists(view / relative):
                continue
            _copy_parents(view, layer, Path(relative).parent)
            source = Path(str(mount.get("source", "")))
            if mount.get("type") == "bind" and source.exists() and not source.is_dir():
                (layer / relative).touch(mode=0o644)
            else:
                (layer / relative).mkdir(mode=0o755, exist_ok=True)
        # /etc/hostname is the engine's per container: its mount point is always there.
        _copy_parents(view, layer, Path("etc"))
        (layer / "etc" / "hostname").touch(mode=0o644)
        # The engine's init layer leaves an empty /.dockerenv (mode 755) in every container: a
        # program could otherwise tell the paths apart by it (tests/sandbox/test_concurrent_isolation.py).
        if not os.path.lexists(view / ".dockerenv"):
            (layer / ".dockerenv").touch(mode=0o755)
            os.chmod(layer / ".dockerenv", 0o755)
    finally:
        if len(lowers) > 1:
            unmount(view)
    layers = (str(layer), *lowers)
    overlay_options(layers)  # fails here, at open, not at the first call
    return layers


_MAX_LINKS = 40  # the kernel's own bound on links followed in one lookup


def resolve_within(root: Path, path: str) -> Path:
    """``path`` relative to ``root`` with every symbolic link on the way followed as if
    ``root`` were ``/`` (an absolute link's target and ``..`` never leave it): where a mount
    at ``path`` inside a container rooted there lands."""
    parts = [part for part in path.split("/") if part not in ("", ".")]
    resolved: list[str] = []
    followed = 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            if resolved:
                resolved.pop()
            continue
        candidate = root.joinpath(*resolved, part)
        if candidate.is_symlink():
            followed += 1
            if followed > _MAX_LINKS:
                raise SandboxUnavailable(f"runc-direct: too many links resolving {path!r} in the image")
            target = os.readlink(candidate)
            if target.startswith("/"):
                resolved = []
            parts = [p for p in target.split("/") if p not in ("", ".")] + parts
            continue
        resolved.append(part)
    return Path(*resolved) if resolved else Path(".")


def _copy_parents(view: Path, layer: Path, relative: Path) -> None:
    """Create ``relative``'s directories in ``layer`` with the image's own mode and owner, so the
    merged view shows the image's directories unchanged."""
    current = Path()
    for part in relative.parts:
        current = current / part
        made = layer / current
        if made.exists():
            continue
        made.mkdir()
        original = view / current
        if original.is_dir():
            stat = original.stat()
            os.chown(made, stat.st_uid, stat.st_gid)
            os.chmod(made, stat.st_mode & 0o7777)


# -- one container per call ----------------------------------------------------------------------


# Stand-ins for what changes per call, in the spec rendered once per template (Template.text):
# a call's spec is that text with these replaced, no copy or serialization of the whole spec.
_MARK_UID = 987654320123456789
_MARK_NAME = "proctor-oci-mark-name"
_MARK_HOSTNAME = "proctor-oci-mark-hostname"
_MARK_BUNDLE = "/proctor-oci-mark-bundle"

# A container's host-counter files: a folder of its bundle, beside its hostname file.
COUNTERS_DIR = "counters"


@dataclass
class Template:
    """One image and configuration's spec, and the layers each of its containers mounts as root."""

    spec: dict[str, Any]
    uid: int
    layers: tuple[str, ...]
    # How its containers get the image's prepare step (sandbox/docker/prepare_once.py): replayed from
    # the tree recorded once, or the entrypoint per container, and why.
    prepare: str = "the entrypoint runs in every container"
    # The filter runc installed for this spec, recorded once, and the helper that installs it in
    # every container instead of runc (sandbox/docker/seccomp_once.py); how, or why not, in words.
    seccomp_filter: bytes | None = field(default=None, repr=False)
    helper: Path | None = None
    seccomp: str = "runc compiles the profile in every container"
    # The host-counter files its containers get, each its own copy (sandbox/docker/host_counters.py);
    # None where the engine bound none (the spec then has no such mounts).
    counters: host_counters.CounterView | None = None
    _text: str | None = field(default=None, repr=False, compare=False)

    def text(self) -> str:
        """The spec with stand-ins for what :func:`call_spec` changes, serialized once."""
        if self._text is None:
            marked = json.dumps(_render(self, _MARK_NAME, _MARK_HOSTNAME, _MARK_UID, _MARK_BUNDLE))
            if any(str(mark) in json.dumps(self.spec) for mark in _MARKS):
                raise SandboxError("runc-direct: the engine's spec holds one of Proctor's stand-ins")
            self._text = marked
            # Proved once per template: the rendered text is exactly call_spec's spec.
            sample = ("proctor-oci-1-0123456789abcdef-0123456789ab", self.uid + 1, Path("/x/bundle"))
            if json.loads(call_spec_text(self, *sample)) != call_spec(self, *sample):
                self._text = None
                raise SandboxError("runc-direct: the rendered spec differs from the call's spec")
        return self._text


_MARKS = (_MARK_UID, _MARK_NAME, _MARK_HOSTNAME, _MARK_BUNDLE)


# The launcher's code, compiled once per template by the image's own interpreter (marshal's
# format is the interpreter's): each container's launcher then loads the code object instead of
# compiling its source (about 10 ms of CPU per container in the pinned image). The code travels
# compressed, in base64 (zlib and binascii are built into the interpreter): 16 KB of arguments
# instead of 66 KB of hex, which runc parses twice and every exec on the way copies, and which
# Python decodes character by character at start-up (about 1.5 ms of the launcher's CPU).
_COMPILER = (
    "import binascii, marshal, sys, zlib; sys.stdout.write(binascii.b2a_base64(zlib.compress("
    "marshal.dumps(compile(sys.stdin.read(), '<launcher>', 'exec')), 9), newline=False).decode())"
)
# sys.argv then holds the launcher's configuration at [1], as under ``-c LAUNCHER``.
LOADER = (
    "import binascii, marshal, sys, zlib; "
    "exec(marshal.loads(zlib.decompress(binascii.a2b_base64(sys.argv.pop(1)))))"
)
_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")


def _launcher_index(args: list[str], source: str) -> int:
    """Where the launcher's source is in the spec's arguments (right after ``-c``)."""
    for index, arg in enumerate(args):
        if arg == source and index > 0 and args[index - 1] == "-c":
            return index
    raise SandboxError("runc-direct: the spec's arguments do not hold the launcher's source")


def precompile_launcher(template: Template, run_id: str, source: str) -> Template:
    """``template`` with the launcher's source (``-c SOURCE``) replaced by :data:`LOADER` and the
    code object the image's interpreter compiled from it, in one container of this template
    (same root, limits, seccomp; the program never runs there). The launcher's configuration stays
    the last argument; nothing else changes."""
    with _template_container(template, run_id) as (runc, name, bundle):
        spec = call_spec(runc_compiled(template), name, template.uid, bundle)
        args = spec["process"]["args"]
        index = _launcher_index(args, source)
        spec["process"]["args"] = [*args[:index], _COMPILER]
        (bundle / "config.json").write_text(json.dumps(spec))
        done = subprocess.run(
            [runc, "--root", str(RUNC_ROOT), "run", "--bundle", str(bundle), name],
            input=source.encode(),
            capture_output=True,
            timeout=_RUNC_TIMEOUT_S * 2,
            check=False,
        )
    code = done.stdout.decode("ascii", "replace").strip()
    if done.returncode != 0 or not _BASE64.fullmatch(code):
        said = (done.stderr.decode("utf-8", "replace").strip() or code)[-300:]
        raise SandboxError(f"runc-direct: the image's interpreter did not compile the launcher: {said!r}")
    compiled = copy.deepcopy(template.spec)
    original = compiled["process"]["args"]
    compiled["process"]["args"] = [*original[:index], LOADER, code, *original[index + 1 :]]
    return replace(template, spec=compiled, _text=None)


def _probe_prepare(template: Template, run_id: str, program_uid: int) -> bytes:
    """What one probe container of ``template`` says: its launcher runs the image's entrypoint,
    reports the tree it left (sandbox/docker/prepare_once.py) and exits; no program runs there."""
    with _template_container(template, run_id) as (runc, name, bundle):
        spec = call_spec(runc_compiled(template), name, program_uid, bundle)
        args = spec["process"]["args"]
        args[-1] = prepare_once.as_probe(args[-1])
        (bundle / "config.json").write_text(json.dumps(spec))
        try:
            done = subprocess.run(
                [runc, "--root", str(RUNC_ROOT), "run", "--bundle", str(bundle), name],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=_RUNC_TIMEOUT_S * 2,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return b"the probe container did not finish in time"
    return done.stdout


def prepare_once_per_template(template: Template, run_id: str, probe_uids: tuple[int, int]) -> Template:
    """``template`` whose containers rebuild the tree its image's entrypoint leaves, recorded
    here once, instead of running the entrypoint; or ``template`` unchanged (the entrypoint per
    container) where that tree cannot be recorded and replayed faithfully."""
    spec = copy.deepcopy(template.spec)
    args = spec["process"]["args"]
    recorded = prepare_once.record(lambda uid: _probe_prepare(template, run_id, uid), probe_uids, args[-1])
    if recorded.config is None:
        per_container = f"the entrypoint runs in every container: {recorded.reason}"
        return replace(template, prepare=per_container, _text=None)
    args[-1] = recorded.config
    return replace(template, spec=spec, prepare=recorded.reason, _text=None)


def runc_compiled(template: Template) -> Template:
    """``template`` with runc compiling the profile itself: for the containers started once per
    template (compiling the launcher, probing the prepare step, recording the filter)."""
    if template.seccomp_filter is None:
        return template
    return replace(template, seccomp_filter=None, helper=None, _text=None)


def _probe_filters(template: Template, run_id: str) -> seccomp_once.Installed:
    """What the kernel holds for the init of one container of ``template``, read once its
    process runs; the container is removed whatever happens. Its launcher waits for a program
    that never comes."""
    read_end, write_end = os.pipe2(os.O_CLOEXEC)
    process: RuncProcess | None = None
    try:
        with _template_container(template, run_id) as (runc, name, bundle):
            (bundle / "config.json").write_text(call_spec_text(template, name, template.uid, bundle))
            pid_file = bundle / "init.pid"
            process = _spawn_run(runc, template, bundle, name, read_end, keep=False, pid_file=pid_file)
            deadline = time.monotonic() + _RUNC_TIMEOUT_S
            # runc writes the init's pid (to a temporary name, then renamed) once it is created.
            while not pid_file.is_file():
                if process.poll() is not None:
                    said = process.stderr.read().decode("utf-8", "replace").strip()[-300:]
                    raise SandboxError(f"runc-direct: the seccomp probe container ended early: {said!r}")
                if time.monotonic() > deadline:
                    raise SandboxError("runc-direct: the seccomp probe container did not start in time")
                time.sleep(0.002)
            pid = int(pid_file.read_text().strip())
            seccomp_once.wait_until_running(pid, template.spec["process"]["args"][0], _RUNC_TIMEOUT_S)
            return seccomp_once.installed(pid)
    finally:
        # The container is deleted by now, so ``runc run`` ends.
        os.close(read_end)
        os.close(write_end)
        if process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=_RUNC_TIMEOUT_S)
            process.stdout.close()
            process.stderr.close()


def record_seccomp_once(template: Template, run_id: str) -> Template:
    """``template`` whose containers get the filter runc installed for it, recorded here once,
    from the seccomp helper instead of runc compiling the profile in each; or ``template``
    unchanged, with the reason, wherever that filter cannot be recorded and proved the same
    (sandbox/docker/seccomp_once.py)."""
    template = runc_compiled(template)

    def keep(reason: str) -> Template:
        return replace(
            template, seccomp=f"runc compiles the profile in every container: {reason}", _text=None
        )

    reason = seccomp_once.why_not(template.spec)
    if reason is not None:
        return keep(reason)
    helper = seccomp_once.helper_binary(HELPERS_DIR)
    if isinstance(helper, str):
        return keep(helper)
    key = _proof_key(template.spec, helper)
    with _PROVED_LOCK:
        proved = _PROVED.get(key)
    if proved is not None:
        return replace(template, seccomp_filter=proved[0], helper=helper, seccomp=proved[1], _text=None)
    try:
        engine = _probe_filters(template, run_id)
        if len(engine.filters) != 1:
            return keep(f"runc installed {len(engine.filters)} filters, not one")
        candidate = replace(template, seccomp_filter=engine.filters[0][0], helper=helper, _text=None)
        ours = _probe_filters(candidate, run_id)
    except (OSError, SandboxError, ValueError, subprocess.SubprocessError) as exc:
        return keep(f"the filter runc installs could not be read back ({exc})")
    if ours != engine:
        return keep("the helper's container did not hold runc's filter, flags and status exactly")
    digest = hashlib.sha256(engine.filters[0][0]).hexdigest()[:16]
    said = (
        f"runc's own filter ({len(engine.filters[0][0]) // 8} instructions, sha256 {digest}), "
        "recorded once and installed by the seccomp helper"
    )
    with _PROVED_LOCK:
        _PROVED[key] = (engine.filters[0][0], said)
    return replace(candidate, seccomp=said)


# Filters proved in this process, by what runc compiles them from: the spec's seccomp section and
# noNewPrivileges, the runc binary, the helper. Another template with the same profile (other
# limits, another image, another sandbox of this controller) takes the proof instead of two probes.
_PROVED: dict[str, tuple[bytes, str]] = {}
_PROVED_LOCK = threading.Lock()


def _proof_key(spec: dict[str, Any], helper: Path) -> str:
    runc = Path(runc_binary() or "runc").resolve()
    found = runc.stat()
    basis = {
        "seccomp": spec["linux"]["seccomp"],
        "no_new_privileges": spec["process"].get("noNewPrivileges"),
        "runc": [str(runc), found.st_size, found.st_mtime_ns],
        "helper": str(helper),
    }
    return hashlib.sha256(json.dumps(basis, sort_keys=True).encode()).hexdigest()


def owner_directory(run_id: str) -> Path:
    return STATE_ROOT / f"{os.getpid()}-{run_id}"


def new_name(run_id: str) -> str:
    return f"{NAME_PREFIX}{os.getpid()}-{run_id}-{secrets.token_hex(6)}"


@dataclass
class DirectContainer:
    """A container ``runc run`` started for one call, and the thread relaying its output."""

    name: str
    bundle: Path
    process: RuncProcess
    relay: threading.Thread
    _removed: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # Set when the launcher's report arrived for a call that will not reuse the container: the
    # launcher then exits on its own.
    exiting: bool = False

    def kill(self) -> None:
        _runc("kill", self.name, "KILL")

    def wait(self, timeout: float) -> int:
        """The container's exit status as runc reports it (128 + signal when killed)."""
        return self.process.wait(timeout=timeout)

    def oom_killed(self) -> bool:
        """The kernel's OOM killer ended a process of this container's memory group."""
        return oom_kills(self.name) > 0


def call_spec(template: Template, name: str, program_uid: int, bundle: Path) -> dict[str, Any]:
    """The spec of one call's container, whose bundle directory is ``bundle`` (its hostname file
    and its own root mount are there): the engine's, with exactly what the module docstring lists
    changed (tests/sandbox/test_oci_direct.py holds every other byte equal)."""
    return _render(template, name, name[-12:], program_uid, str(bundle))


def call_spec_text(template: Template, name: str, program_uid: int, bundle: Path) -> str:
    """:func:`call_spec` serialized, from the text rendered once per template: a few string
    replacements per call instead of copying and serializing the whole spec (seccomp included)."""
    return (
        template.text()
        .replace(str(_MARK_UID), str(program_uid))
        .replace(_MARK_BUNDLE, str(bundle))
        .replace(_MARK_HOSTNAME, name[-12:])
        .replace(_MARK_NAME, name)
    )


def _render(template: Template, name: str, hostname: str, program_uid: int, bundle: str) -> dict[str, Any]:
    spec = copy.deepcopy(template.spec)
    rewrite_uid(spec, template.uid, program_uid)
    spec["hostname"] = hostname
    for mount in spec.get("mounts", []):
        if mount.get("destination") == "/etc/hostname":
            mount["source"] = f"{bundle}/hostname"
        elif template.counters is not None and mount.get("destination") in host_counters.VIRTUALIZED:
            mount["source"] = f"{bundle}/{COUNTERS_DIR}/{host_counters.file_name(str(mount['destination']))}"
    spec["root"] = {"path": f"{bundle}/rootfs", "readonly": True}
    spec.pop("hooks", None)
    if template.seccomp_filter is not None:
        spec["linux"].pop("seccomp")
        spec["process"]["args"] = seccomp_once.args_with_helper(
            spec["process"]["args"], template.seccomp_filter
        )
    linux = spec.setdefault("linux", {})
    linux["cgroupsPath"] = f"/{CGROUP_PARENT}/{name}"
    return spec


def memory_group(name: str) -> Path | None:
    """The container's cgroup v1 memory group, None under cgroup v2 (sockets always charged)."""
    group = CGROUP_ROOT / "memory" / CGROUP_PARENT / name
    return group if group.is_dir() else None


_LIVE: dict[str, DirectContainer] = {}
_LIVE_LOCK = threading.Lock()


def _new_bundle(run_id: str) -> tuple[str, str, Path]:
    """The runc binary, a new container name of the run, and its (new, empty) bundle directory."""
    runc = runc_binary()
    if runc is None:
        raise SandboxUnavailable("runc-direct needs the runc binary on PATH")
    name = new_name(run_id)
    bundle = owner_directory(run_id) / "bundles" / name
    bundle.mkdir(parents=True)
    return runc, name, bundle


@contextlib.contextmanager
def _template_container(template: Template, run_id: str) -> Iterator[tuple[str, str, Path]]:
    """A container started once per template, not for a call (compiling the launcher, probing
    the prepare step, recording the filter): the runc binary, its name and its bundle, with its
    hostname file written and its root mounted; deleted with its cgroups, root and bundle
    whatever happens."""
    runc, name, bundle = _new_bundle(run_id)
    try:
        _write_per_container_files(template, name, bundle)
        mount_overlay(bundle / "rootfs", template.layers)
        yield runc, name, bundle
    finally:
        _runc("delete", "--force", name)
        remove_cgroups(name)
        discard_bundle(bundle)


def discard_bundle(bundle: Path) -> None:
    """Remove a bundle directory, its root unmounted first: never a walk into the image."""
    if unmount(bundle / "rootfs"):
        shutil.rmtree(bundle, ignore_errors=True)


def _write_per_container_files(template: Template, name: str, bundle: Path) -> None:
    """The files a container's spec binds from its bundle: its hostname and its counters."""
    (bundle / "hostname").write_text(name[-12:] + "\n")
    if template.counters is not None:
        host_counters.write_files(template.counters, bundle / COUNTERS_DIR)


def start(template: Template, run_id: str, program_uid: int) -> tuple[str, socket.socket]:
    """Start one fresh container from ``template``; return its name and the host's end of a
    socket that carries its stdin and, framed as the engine's attach stream, its output."""
    runc, name, bundle = _new_bundle(run_id)
    _write_per_container_files(template, name, bundle)
    (bundle / "config.json").write_text(call_spec_text(template, name, program_uid, bundle))
    host, peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        mount_overlay(bundle / "rootfs", template.layers)
        process = _spawn_run(runc, template, bundle, name, peer.fileno(), keep=True)
    except BaseException:
        host.close()
        peer.close()
        discard_bundle(bundle)
        raise
    relay = threading.Thread(
        target=_relay, args=(process, peer), name=f"sandbox-relay-{name[-12:]}", daemon=True
    )
    container = DirectContainer(name, bundle, process, relay)
    with _LIVE_LOCK:
        _LIVE[name] = container
    relay.start()
    return name, host


def _spawn_run(
    runc: str,
    template: Template,
    bundle: Path,
    name: str,
    stdin: int,
    keep: bool,
    pid_file: Path | None = None,
) -> RuncProcess:
    """``runc run`` of the bundle's spec, stdin from ``stdin``; with the template's seccomp helper
    at fd 3 when its spec runs through it (sandbox/docker/seccomp_once.py)."""
    argv = [runc, "--root", str(RUNC_ROOT), "--log", str(bundle / "runc.log"), "run"]
    argv += ["--keep"] if keep else []
    argv += ["--pid-file", str(pid_file)] if pid_file is not None else []
    helper_fd = None
    if template.helper is not None and template.seccomp_filter is not None:
        argv += ["--preserve-fds", "1"]
        helper_fd = os.open(template.helper, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return RuncProcess([*argv, "--bundle", str(bundle), name], stdin, helper_fd)
    finally:
        if helper_fd is not None:
            os.close(helper_fd)


def _relay(process: RuncProcess, peer: socket.socket) -> None:
    """Frame the container's stdout and stderr into ``peer`` as the engine's attach stream does
    (stream id, three zero bytes, big-endian length, payload), until both end."""
    import selectors

    assert process.stdout is not None and process.stderr is not None
    streams = {process.stdout.fileno(): _STREAM_STDOUT, process.stderr.fileno(): _STREAM_STDERR}
    selector = selectors.DefaultSelector()
    for fd in streams:
        selector.register(fd, selectors.EVENT_READ)
    try:
        while streams:
            for key, _ in selector.select():
                fd = int(key.fd)
                data = os.read(fd, 65536)
                if not data:
                    selector.unregister(fd)
                    del streams[fd]
                    continue
                header = bytes([streams[fd], 0, 0, 0]) + len(data).to_bytes(4, "big")
                try:
                    peer.sendall(header + data)
                except OSError:
                    return  # the host let go of the container: stop relaying, it is being removed
    finally:
        selector.close()
        with contextlib.suppress(OSError):
            peer.shutdown(socket.SHUT_WR)
        peer.close()
        process.stdout.close()
        process.stderr.close()


def note_exiting(name: str) -> None:
    """The container's launcher reported its call and will exit by itself (no reuse follows)."""
    container = live(name)
    if container is not None:
        container.exiting = True


def live(name: str) -> DirectContainer | None:
    with _LIVE_LOCK:
        return _LIVE.get(name)


def is_direct(container_id: str) -> bool:
    return NAME.fullmatch(container_id) is not None


def _runc(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [runc_binary() or "runc", "--root", str(RUNC_ROOT), *args],
        capture_output=True,
        timeout=_RUNC_TIMEOUT_S,
        check=False,
    )


def state(name: str) -> str | None:
    """runc's status of the container (``running``, ``stopped``, ...), None when it has none."""
    done = _runc("state", name)
    if done.returncode != 0:
        return None
    with contextlib.suppress(ValueError):
        return str(json.loads(done.stdout).get("status"))
    return None


def kill(name: str) -> None:
    _runc("kill", name, "KILL")


def oom_kills(name: str) -> int:
    """``oom_kill`` of the container's memory group (cgroup v1 ``memory.oom_control``, or v2
    ``memory.events``); read before the container is deleted, which removes the group."""
    for path in (
        CGROUP_ROOT / "memory" / CGROUP_PARENT / name / "memory.oom_control",
        CGROUP_ROOT / CGROUP_PARENT / name / "memory.events",
    ):
        with contextlib.suppress(OSError, ValueError):
            for line in path.read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
    return 0


def remove(name: str) -> None:
    """Kill and delete the container, its cgroups and its bundle; an absent one counts as removed."""
    container = live(name)
    if container is not None and container.exiting:
        with contextlib.suppress(subprocess.TimeoutExpired):
            container.process.wait(timeout=_REPORTED_EXIT_GRACE_S)
    # A stopped container's groups, every one runc made (its state lists them all), are gone
    # once _delete_stopped succeeds: no search of every hierarchy after it (0.4 ms per call).
    deleted = container is not None and container.process.poll() is not None and _delete_stopped(name)
    if not deleted:
        _runc("delete", "--force", name)
    if container is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            container.process.wait(timeout=_RUNC_TIMEOUT_S)
        if container.process.poll() is None:
            container.process.kill()
            container.process.wait()
        container.relay.join(timeout=5)
        discard_bundle(container.bundle)
        with _LIVE_LOCK:
            _LIVE.pop(name, None)
    if not deleted:
        remove_cgroups(name)
    match = NAME.fullmatch(name)
    if match is not None and container is None:
        # Not this process's (a sweep's, or a container it lost track of): its bundle by name.
        owner = STATE_ROOT / f"{match.group(1)}-{match.group(2)}"
        discard_bundle(owner / "bundles" / name)


def _delete_stopped(name: str) -> bool:
    """What ``runc delete`` does to a stopped container, without starting runc: remove its
    cgroups (from runc's own state) and its state directory. Only for a container whose
    ``runc run`` has exited, so its init is dead; False, having changed nothing runc needs,
    when a group still holds a process (the kernel is still ending the PID namespace's others)
    or the state cannot be read: the caller then runs ``runc delete --force``."""
    state_dir = RUNC_ROOT / name
    try:
        recorded = json.loads((state_dir / "state.json").read_text())
        paths = [Path(str(path)) for path in (recorded.get("cgroup_paths") or {}).values()]
    except (OSError, ValueError, AttributeError):
        return False
    if any(path.name != name or path.parent.name != CGROUP_PARENT for path in paths):
        return False  # not a group this module named: runc decides
    # Deepest first, each once: under cgroup v1 several controllers may share one directory.
    for group in sorted(set(paths), key=lambda path: len(path.parts), reverse=True):
        try:
            group.rmdir()
        except FileNotFoundError:
            continue
        except OSError:
            return False
    shutil.rmtree(state_dir, ignore_errors=True)
    return not state_dir.exists()


def remove_cgroups(name: str) -> None:
    """rmdir the container's groups runc left (an empty group only; runc removes them itself)."""
    for group in CGROUP_ROOT.glob(f"*/{CGROUP_PARENT}/{name}"):
        with contextlib.suppress(OSError):
            group.rmdir()
    with contextlib.suppress(OSError):
        (CGROUP_ROOT / CGROUP_PARENT / name).rmdir()


def release_owner(run_id: str) -> None:
    """Unmount this controller's image roots and remove its directory (after its containers)."""
    release_directory(owner_directory(run_id))


def release_directory(directory: Path) -> None:
    # Each container's own root, then each image's (a tree an older version left mounted).
    mounted = [
        *directory.glob("bundles/*/rootfs"),
        *directory.glob("images/*/rootfs"),
        *directory.glob("images/*/view"),
    ]
    if all([unmount(path) for path in mounted]):
        shutil.rmtree(directory, ignore_errors=True)


def image_directory(run_id: str, image_id: str) -> Path:
    key = image_id.split(":")[-1][:16]
    return owner_directory(run_id) / "images" / key
