"""One sandbox container's life: create it locked down, hand it one program, read what it says.

Every container starts the *launcher* (``python3 -I -S -c LAUNCHER CONFIG``, its text
sandbox/docker/launcher.py's), which waits on stdin for a length-prefixed JSON request and forks
the program in it as a brand-new process. This lets the warm pool start containers ahead of
demand and still give each call a process and filesystem nobody used before; a per-call
container uses the same path. This module is the host's side of that conversation.

All functions here block (the docker SDK is synchronous); callers run them in worker threads.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import re
import secrets
import selectors
import shutil
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import requests
from docker.errors import APIError, DockerException, NotFound
from docker.types import Ulimit

from proctor.sandbox.api import OPEN_FILES, Limits, SandboxError
from proctor.sandbox.docker import host_counters, launcher, oci_direct, socket_memory
from proctor.sandbox.docker.labels import RUN_ID as RUN_ID_LABEL
from proctor.sandbox.docker.runtimes import (
    RUNC,
    RUNSC,
    host_pids_limit,
    program_process_limit,
    security_options,
)
from proctor.sandbox.docker.seccomp import filters_by_machine
from proctor.sandbox.output import CappedBuffer
from proctor.sandbox.program import SOURCE_FD
from proctor.sandbox.reaper import BACKSTOP_GRACE_S

WORKDIR = "/work"
NO_PTYS = "ro,nosuid,nodev,noexec,size=4k,nr_inodes=1,mode=0755"
# The launcher is a real module (linted, type-checked, its functions tested on the host), and the
# ``-c`` argument is its text byte for byte, read once as it is on disk, as the FrontierMath
# driver is (agent/tracks/frontiermath/submission.py). What it does and promises: its docstring.
LAUNCHER = Path(launcher.__file__).read_text(encoding="utf-8")
HEADER_DIGITS = launcher.HEADER_DIGITS
# SETUID/SETGID: the program's fork drops to the sandbox user. SETPCAP: it also empties its
# capability bounding set. KILL: a root process may signal another uid's processes only with it
# (the backstop and the final sweep). Nothing else: no DAC override, no chown, no ptrace.
LAUNCHER_CAPS = ("SETUID", "SETGID", "SETPCAP", "KILL")
_RECV_BYTES = 256 * 1024
_KILL_GRACE_S = 5.0
_STREAM_STDOUT = 1
_STREAM_STDERR = 2
# The trailing CPU figures (launcher, entrypoint, program, microseconds) are optional: a
# report without them is still the launcher's.
_REPORT = re.compile(rb"\x00proctor-exit:([0-9a-f]+):(-?\d+):([01]):([01])(?::(\d+):(\d+):(\d+))?\x00$")
_REPORT_MAX = 160
_SIGKILLED = 128 + 9
READY_MARKER = launcher.READY
_READY_TIMEOUT_S = 60.0


# Per-uid kernel accounting is keyed by the host uid, and containers share the host's: inotify
# instances (128 per uid here), POSIX message-queue bytes, queued signals, pipe buffer pages,
# RLIMIT_NPROC. With the image's uid in every container, one call could exhaust them for every
# call running beside it (measured: a call holding 128 inotify instances left another
# container's inotify_init() failing with EMFILE), or signal through them. So each container's
# program runs as a host uid of its own, in a range no account or the local backend uses
# (sandbox/local/bwrap.py takes 0x70000000 + [0, 2^24)); its group stays the image user's.
CONTAINER_UID_BASE = 0x60000000
CONTAINER_UID_SPAN = 1 << 24


def container_uid() -> int:
    return CONTAINER_UID_BASE + secrets.randbelow(CONTAINER_UID_SPAN)


class ContainerGone(Exception):
    """The container died or was removed before the program was handed over (nothing ran)."""


@dataclass
class StartedContainer:
    """A started container whose launcher is waiting, and our attached connection to it.

    The connection is opened before the start, so nothing the container says is missed,
    and kept until the call: it is the program's stdin, stdout and stderr.
    """

    id: str
    sock: socket.socket
    _response: Any
    runtime: str = RUNC
    busy: bool = False
    _closed: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def interrupt(self) -> None:
        """Wake whichever thread is blocked on the connection; it sees end-of-stream.

        Unlike close(), this never frees the descriptor under a thread still using it (the
        number could be reused by another connection in the meantime).
        """
        with self._lock:
            if not self._closed:
                with contextlib.suppress(OSError):
                    self.sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        with contextlib.suppress(OSError):
            self.sock.close()
        with contextlib.suppress(Exception):
            self._response.close()

    def gone(self) -> bool:
        """True when the engine closed the connection (the container died while waiting)."""
        try:
            peeked = self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            return True
        return not peeked  # EOF; the launcher itself says nothing until it has a program


@dataclass
class RawRun:
    """What came back from one container, before it becomes an ExecResult."""

    exit_code: int | None
    stdout: CappedBuffer
    stderr: CappedBuffer
    timed_out: bool
    oom_killed: bool
    duration_s: float
    # The launcher ended the call cleanly and waits for :func:`recycle_container`; the host's
    # connection to it is still open.
    reusable: bool = False
    # CPU by part from the launcher's report (process accounting inside the container):
    # ``launcher``, ``prepare`` (the image's entrypoint) and ``program``, microseconds.
    cpu_us: dict[str, int] | None = None
    # What the container's cgroup counted from the request to the end of the call, read by the
    # controller itself (ExecResult.cpu_s); None where either reading failed.
    call_cpu_us: int | None = None


# The engine's own masked paths (moby's oci/defaults.go; read from the spec Docker 20.10 wrote
# for a container with no HostConfig.MaskedPaths), which a HostConfig that names any replaces:
# kept whole, so the list only grows. A path a kernel lacks is skipped by runc.
ENGINE_MASKED_PATHS = (
    "/proc/asound",
    "/proc/acpi",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
)
# What Proctor masks besides (docs/sandbox.md, "What concurrent samples share"): the host's
# open-file-description locks, and its pressure stall figures (PSI), which carried a channel
# between concurrent samples whose bandwidth rose with the machine's load (29-56 bit/s measured).
PROCTOR_MASKED_PATHS = ("/proc/locks", "/proc/pressure")


def container_settings(
    api: docker.APIClient,
    limits: Limits,
    labels: dict[str, str],
    user: str,
    prepare: list[str] | None,
    runtime: str,
    program_uid: int,
    recycle: bool = True,
    counters: Path | None = None,
) -> dict[str, Any]:
    """Every setting of one sandbox container: ``create_container``'s arguments but the image.
    The runc-direct path (sandbox/docker/oci_direct.py) has the engine turn exactly these into a spec.
    ``counters``: the directory of the container's own host-counter files (sandbox/docker/host_counters.py),
    bound over the host's; None leaves the host's."""
    memory = limits.memory_bytes
    image_uid, _, gid = user.partition(":")
    if not image_uid.isdigit() or int(image_uid) == 0 or not (gid or image_uid).isdigit():
        raise ValueError(f"the sandbox user must be a numeric, non-root uid[:gid], not {user!r}")
    gid = gid or image_uid
    uid = str(program_uid)
    # Under runsc the program's processes are bounded inside gVisor's kernel (sandbox/docker/runtimes.py).
    nproc = program_process_limit(runtime, limits) or 0
    launcher_config = json.dumps(
        {
            "uid": int(uid),
            "gid": int(gid),
            "prepare": prepare or [],
            "nproc": nproc,
            "source_fd": SOURCE_FD,
            # The program's own seccomp filter (sandbox/docker/seccomp.py), one per architecture: the
            # launcher installs its machine's in every process it demotes, and refuses to start
            # on a machine without one.
            "seccomp": filters_by_machine(),
            # False: the container serves one call, so its launcher takes no picture of its
            # fresh state to compare a reset against.
            "recycle": recycle,
        }
    )
    # The engine copies the image directory's mode onto a tmpfs mounted over it, so ``mode``
    # alone does not make /work writable; owning it does.
    # Inodes too are bounded (one per 4 KiB of size): without nr_inodes a tmpfs allows one per
    # two pages of host RAM, millions of empty files charged to nobody's byte limit.
    inodes = max(1024, limits.tmpfs_bytes // 4096)
    tmpfs_opts = f"rw,nosuid,nodev,mode=1777,uid={uid},gid={gid},nr_inodes={inodes}"
    # /dev/shm too: the engine's own shm mount has no inode bound (three million files here,
    # each charged to nobody's byte limit); this one is sized like it and bounded like the others.
    shm_bytes = min(64 * 1024 * 1024, limits.tmpfs_bytes)
    shm_opts = f"rw,nosuid,nodev,noexec,mode=1777,size={shm_bytes},nr_inodes={max(1024, shm_bytes // 4096)}"
    host_config = api.create_host_config(
        network_mode="none",
        read_only=True,
        # The container's own /proc/meminfo, /proc/stat, CPU list... over the host's
        # (sandbox/docker/host_counters.py): no call reads another's memory use there.
        binds=host_counters.binds(counters) if counters is not None else None,
        tmpfs={
            "/tmp": f"{tmpfs_opts},size={limits.tmpfs_bytes}",
            WORKDIR: f"{tmpfs_opts},size={limits.tmpfs_bytes}",
            "/dev/shm": shm_opts,
            # An empty read-only tmpfs in place of the engine's devpts: no pseudo-terminals.
            # Their count is host-wide (kernel.pty.max, 4096, of which all but kernel.pty.reserve
            # go to every container and bwrap sandbox together), so one call holding 3072 of
            # them left every other call's openpty() failing. No computation needs one.
            "/dev/pts": NO_PTYS,
        },
        cap_drop=["ALL"],
        cap_add=list(LAUNCHER_CAPS),
        security_opt=security_options(runtime),
        init=True,
        pids_limit=host_pids_limit(runtime, limits),
        mem_limit=memory,
        # Swap equal to memory means no swap at all: the OOM killer, not the disk, answers.
        memswap_limit=memory,
        nano_cpus=int(limits.cpus * 1e9),
        ulimits=[
            Ulimit(name="nofile", soft=OPEN_FILES, hard=OPEN_FILES),
            Ulimit(name="fsize", soft=limits.file_size_bytes, hard=limits.file_size_bytes),
            Ulimit(name="core", soft=0, hard=0),
        ],
        ipc_mode="private",
        # Output reaches us through the attached connection only; a logging driver would
        # also write every flood to the engine's disk.
        log_config={"type": "none", "config": {}},
        runtime=runtime,
    )
    if runtime == RUNC:
        # /proc/locks lists every open-file-description lock of the host with its byte range,
        # in every pid namespace (such a lock has no owning pid to filter by): one call wrote
        # 2,160 bytes there that another read. Masked as the engine masks its own list; under
        # runsc the list is gVisor's, per sandbox, already. runc-direct takes this from the spec.
        host_config["MaskedPaths"] = [*ENGINE_MASKED_PATHS, *PROCTOR_MASKED_PATHS]
    threads = str(max(1, int(limits.cpus)))
    return dict(
        # The launcher replaces the image's entrypoint (it would run as root); it runs that
        # entrypoint itself, as the sandbox user. -S: a root process imports only the stdlib.
        entrypoint=["python3", "-I", "-S", "-c", LAUNCHER, launcher_config],
        command=[],
        user="0:0",
        working_dir=WORKDIR,
        environment={
            "HOME": WORKDIR,
            # The container's uid has no passwd entry; getpass.getuser() reads these first.
            "USER": "sandbox",
            "LOGNAME": "sandbox",
            "TMPDIR": "/tmp",
            "LANG": "C.UTF-8",
            "PYTHONIOENCODING": "utf-8",
            "OMP_NUM_THREADS": threads,
            "OPENBLAS_NUM_THREADS": threads,
            "MKL_NUM_THREADS": threads,
            # numba sizes its parallel=True pool by the host CPUs, not the quota; beyond the quota
            # its threads only get throttled.
            "NUMBA_NUM_THREADS": threads,
        },
        labels=labels,
        # Not detached + stdin open makes the SDK set StdinOnce: closing our side of the
        # attached stdin closes the program's stdin.
        detach=False,
        stdin_open=True,
        tty=False,
        # Never copy proxy settings from the host's docker config into the sandbox.
        use_config_proxy=False,
        network_disabled=True,
        host_config=host_config,
    )


def create_started_container(
    api: docker.APIClient,
    image: str,
    limits: Limits,
    labels: dict[str, str],
    user: str,
    on_created: Callable[[str], None] | None = None,
    prepare: list[str] | None = None,
    runtime: str = RUNC,
    recycle: bool = True,
) -> StartedContainer:
    """Create and start one locked-down container; return it once its launcher waits.

    ``user`` is the image's user, numeric ``uid`` or ``uid:gid``, never root: the program runs
    with its group and a uid of this container's own (:func:`container_uid`), and the tmpfs
    mounts are given to that uid (the launcher alone runs as root). ``prepare`` is the image's
    entrypoint, run once as ``user`` before the launcher is ready. ``on_created`` learns the
    ID as soon as the container exists, before it is started.
    """
    counters = own_counters(api, limits, runtime, labels.get(RUN_ID_LABEL, "0" * 16))
    try:
        created = api.create_container(
            image,
            **container_settings(
                api, limits, labels, user, prepare, runtime, container_uid(), recycle, counters
            ),
        )
    except BaseException:
        if counters is not None:
            shutil.rmtree(counters, ignore_errors=True)
        raise
    container_id: str = created["Id"]
    if counters is not None:
        host_counters.adopt(container_id, counters)
    if on_created is not None:
        on_created(container_id)
    try:
        sock_io = api.attach_socket(container_id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
        started = StartedContainer(container_id, getattr(sock_io, "_sock", sock_io), sock_io, runtime)
        try:
            api.start(container_id)
            if runtime == RUNC:
                # Before any program runs (it waits for a request): gVisor's network stack
                # lives in the sentry, whose memory the container's limit already holds.
                _bound_socket_buffers(api, container_id)
            _wait_until_ready(started)
        except BaseException:
            started.close()
            raise
    except BaseException:
        # The start's own error is the one worth reporting; what a failed removal leaves,
        # the owner's close (it tracks the ID) or the sweep removes.
        with contextlib.suppress(DockerException):
            remove_container(api, container_id)
        raise
    return started


def own_counters(api: docker.APIClient, limits: Limits, runtime: str, run_id: str) -> Path | None:
    """A new directory of one container's host-counter files (sandbox/docker/host_counters.py), or None
    where none is bound: under runsc (gVisor answers /proc itself) and for an engine on another
    machine (it cannot bind this host's files)."""
    if runtime != RUNC or not host_counters.engine_is_local(api):
        return None
    return host_counters.new_container_directory(counter_view(limits), run_id)


@functools.lru_cache(maxsize=64)
def counter_view(limits: Limits) -> host_counters.CounterView:
    return host_counters.CounterView.of(limits)


def create_started_direct(
    template: oci_direct.Template,
    run_id: str,
    on_created: Callable[[str], None] | None = None,
) -> StartedContainer:
    """The runc-direct twin of :func:`create_started_container`: one fresh container started by
    the OCI runtime from the engine's spec (sandbox/docker/oci_direct.py); returned once its launcher
    waits, its socket buffers bounded (cgroup v1) before any program runs."""
    name, host = oci_direct.start(template, run_id, container_uid())
    if on_created is not None:
        on_created(name)
    started = StartedContainer(name, host, None)
    try:
        _wait_until_ready(started)
        group = oci_direct.memory_group(name)
        if group is not None:
            # As _bound_socket_buffers does on the docker path: before any program runs.
            try:
                socket_memory.limit_group(group)
            except OSError as exc:
                raise SandboxError(f"container {name}: cannot bound its socket buffers: {exc}") from None
    except BaseException:
        started.close()
        oci_direct.remove(name)
        raise
    return started


def _bound_socket_buffers(api: docker.APIClient, container_id: str) -> None:
    """Make the container's memory group count (and bound) its sockets' buffers; see
    sandbox/docker/socket_memory.py. Possible only for an engine on this host under cgroup v1; a
    group that refuses the limit fails the container."""
    pid = int(api.inspect_container(container_id).get("State", {}).get("Pid") or 0)
    try:
        socket_memory.limit_container(pid, container_id)
    except OSError as exc:
        raise SandboxError(f"container {container_id[:12]}: cannot bound its socket buffers: {exc}") from None


def _wait_until_ready(container: StartedContainer) -> None:
    """Block until the launcher announces it waits; what it printed otherwise explains a failure."""
    streams = {_STREAM_STDOUT: _Stream(4096, ""), _STREAM_STDERR: _Stream(4096, "")}
    splitter = _FrameSplitter(streams)
    deadline = time.monotonic() + _READY_TIMEOUT_S
    container.sock.settimeout(_READY_TIMEOUT_S)
    try:
        while not streams[_STREAM_STDOUT].endswith(READY_MARKER):
            container.sock.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = container.sock.recv(4096)
            if not chunk:
                said = streams[_STREAM_STDERR].buffer.text().strip()[-500:]
                raise ContainerGone(f"the sandbox launcher exited before it was ready: {said!r}")
            splitter.feed(chunk)
    except TimeoutError:
        raise ContainerGone(f"the sandbox launcher was not ready within {_READY_TIMEOUT_S:.0f} s") from None
    finally:
        container.sock.settimeout(None)


# The engine refuses a forced removal that meets a container in the middle of exiting ("Could
# not kill running container …, cannot remove - Container … is not running"): its kill found
# the process gone before the state said so. A moment later the same request succeeds.
_EXITING_RACE = "is not running"
_REMOVE_ATTEMPTS = 5


class RemovalUnconfirmed(DockerException):
    """The engine did not answer a removal in time, or its connection broke mid-request.

    The engine may still be removing the container (a forced removal under gVisor's ptrace
    platform, killing many processes on a loaded host, has taken over a minute). It is a
    ``DockerException`` so that every caller that tolerates a failed removal tolerates this
    one too; whatever is left is removed by the sweep (sandbox/docker/cleanup.py).
    """


def remove_container(api: docker.APIClient, container_id: str) -> None:
    """Kill and remove; a container that is already gone counts as removed.

    Raises ``DockerException`` (``RemovalUnconfirmed`` for a timeout or a broken connection),
    never the HTTP library's own errors.
    """
    if oci_direct.is_direct(container_id):
        oci_direct.remove(container_id)
        return
    for attempt in range(1, _REMOVE_ATTEMPTS + 1):
        try:
            api.remove_container(container_id, force=True, v=True)
        except NotFound:
            host_counters.release(container_id)
            return
        except APIError as exc:
            # "removal already in progress" means someone else is finishing the job.
            if "already in progress" in str(exc):
                host_counters.release(container_id)
                return
            if _EXITING_RACE not in str(exc) or attempt == _REMOVE_ATTEMPTS:
                raise
            time.sleep(0.05 * attempt)
        except requests.exceptions.RequestException as exc:
            # After the engine's own answers: docker's APIError is itself an HTTPError.
            unconfirmed = f"the engine did not confirm removing {container_id[:12]}: {exc}"
            raise RemovalUnconfirmed(unconfirmed) from exc
        else:
            host_counters.release(container_id)
            return


def kill_container(api: docker.APIClient, container_id: str) -> None:
    if oci_direct.is_direct(container_id):
        oci_direct.kill(container_id)
        return
    with contextlib.suppress(NotFound, APIError):
        api.kill(container_id)


def run_program(
    api: docker.APIClient,
    container: StartedContainer,
    argv: list[str],
    stdin: bytes | None,
    timeout: float,
    output_cap: int,
    keep: bool = False,
    source: bytes | None = None,
) -> RawRun:
    """Hand ``argv`` to the waiting launcher and stream its output back, capped, until it exits.

    The wall-clock limit kills the whole container: the program and every child die with it.
    Raises :class:`ContainerGone` when the container died while it waited (nothing ran).
    With ``keep`` the launcher may offer the container for another call (``RawRun.reusable``):
    the connection then stays open for :func:`recycle_container`; otherwise it is closed.
    """
    container.busy = True
    if container.gone():
        container.close()
        raise ContainerGone(f"container {container.id[:12]} stopped while it waited")
    nonce = secrets.token_hex(16)
    streams = {_STREAM_STDOUT: _Stream(output_cap, nonce), _STREAM_STDERR: _Stream(output_cap, nonce)}
    # The host kills the container at the deadline; the launcher's own alarm a little later
    # ends the program even if the host is gone (its controlling process was SIGKILLed).
    backstop_s = max(1, math.ceil(timeout + BACKSTOP_GRACE_S))
    request = json.dumps(
        {
            "argv": argv,
            "nonce": nonce,
            "backstop_s": backstop_s,
            "stdin_bytes": len(stdin or b""),
            # Code too long for a command line (sandbox/program.py) follows the request, before
            # stdin; the launcher hands it to the program on descriptor SOURCE_FD.
            "source_bytes": None if source is None else len(source),
            "keep": keep,
        }
    ).encode("utf-8")
    outgoing = b"%0*d" % (HEADER_DIGITS, len(request)) + request + (source or b"") + (stdin or b"")
    # The group's counter runs from the container's start (and on across a recycled container's
    # calls): the call's CPU is its growth from here. Nothing runs in a waiting container.
    cpu_before_us = container_cpu_us(container.id)
    cpu_at_deadline_us: list[int | None] = []

    def kill_at_deadline() -> None:
        # Read before the kill: the engine's group goes with the container.
        cpu_at_deadline_us.append(container_cpu_us(container.id))
        kill_container(api, container.id)

    started = time.monotonic()
    reusable = False
    try:
        timed_out = _pump(
            container.sock,
            outgoing,
            _FrameSplitter(streams),
            started + timeout,
            on_deadline=kill_at_deadline,
        )
        stdout, stderr = streams[_STREAM_STDOUT], streams[_STREAM_STDERR]
        report = stdout.report if stdout.report is not None and stderr.report is not None else None
        container_us = container_cpu_us(container.id) if report is not None else None
        reusable = report is not None and report[2] and keep and not timed_out
        if report is not None and not reusable:
            # The launcher exits after its report: removal lets runc run reap it (no forced kill).
            oci_direct.note_exiting(container.id)
    finally:
        if reusable:
            container.busy = False
        else:
            container.close()
    if report is not None and not timed_out:
        exit_code, oom_killed, _ = report
    else:
        # No report: the deadline struck, or the launcher itself died (OOM, or the program
        # killed it). The engine's view of the stopped container is then the truth.
        direct = oci_direct.live(container.id)
        if direct is not None:
            # runc-direct: runc's exit status, and the memory group's own OOM count (read before
            # the container is deleted); the engine reads the same two things.
            exit_code = direct.wait(timeout=_KILL_GRACE_S + 5)
            oom_killed = direct.oom_killed()
        else:
            status = api.wait(container.id, timeout=int(_KILL_GRACE_S) + 5)
            exit_code = int(status.get("StatusCode", -1))
            oom_killed = bool(api.inspect_container(container.id).get("State", {}).get("OOMKilled"))
        if container.runtime == RUNSC and not timed_out and not oom_killed and exit_code == _SIGKILLED:
            # Under runsc the host's OOM killer kills the sentry (the memory limit covers it and
            # the program alike), and the engine does not always flag it; nothing else SIGKILLs
            # a container before its deadline but a cleanup run from elsewhere.
            oom_killed = True
        elif container.runtime == RUNSC and not timed_out and not oom_killed:
            # The program cannot end the root launcher, so a container that stopped without
            # its report is gVisor itself failing (its sentry panics with exit 2, e.g. when its
            # own threads exhaust the pids cgroup): the sandbox's fault, never the program's.
            raise SandboxError(
                f"the gVisor sandbox crashed (container exit {exit_code} with no launcher report)"
            )
    timed_out = timed_out and not oom_killed
    cpu_after_us = container_us
    if cpu_after_us is None:
        # No report (or its group was already gone): the deadline's reading, else runc-direct's
        # groups, which stay until Proctor removes them.
        cpu_after_us = cpu_at_deadline_us[0] if cpu_at_deadline_us else container_cpu_us(container.id)
    return RawRun(
        exit_code=None if timed_out else exit_code,
        stdout=stdout.buffer,
        stderr=stderr.buffer,
        timed_out=timed_out,
        oom_killed=oom_killed,
        duration_s=time.monotonic() - started,
        reusable=reusable,
        cpu_us=(
            {
                **dict(zip(("launcher", "prepare", "program"), stdout.cpu_us, strict=True)),
                # Everything in the container until the report: the parts above, the runtime's
                # init (runc init, then docker-init) and orphans docker-init reaped.
                **({"container": container_us} if container_us is not None else {}),
            }
            if report is not None and stdout.cpu_us is not None
            else None
        ),
        call_cpu_us=(
            cpu_after_us - cpu_before_us
            if cpu_before_us is not None and cpu_after_us is not None and cpu_after_us >= cpu_before_us
            else None
        ),
    )


def container_cpu_us(container_id: str) -> int | None:
    """CPU every process of the container has used so far (its cgroup's own count), in
    microseconds; None where its group is not found (a remote engine, the systemd cgroup driver,
    or a container already removed). Read when the launcher's report arrives, before the
    container is gone."""
    group = (
        f"{oci_direct.CGROUP_PARENT}/{container_id}"
        if oci_direct.is_direct(container_id)
        else f"docker/{container_id}"
    )
    with contextlib.suppress(OSError, ValueError):
        return int((oci_direct.CGROUP_ROOT / "cpuacct" / group / "cpuacct.usage").read_text()) // 1000
    with contextlib.suppress(OSError, ValueError):
        for line in (oci_direct.CGROUP_ROOT / group / "cpu.stat").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value)
    return None


def recycle_container(container: StartedContainer) -> None:
    """Let the launcher of a container whose call ended cleanly reset it; return once it is ready.

    Raises :class:`ContainerGone` when the launcher found the container not clean after its reset
    (it then exits): the caller removes the container.
    """
    container.busy = True
    try:
        container.sock.setblocking(True)
        container.sock.sendall(b"R")
        _wait_until_ready(container)
    except OSError as exc:
        raise ContainerGone(f"container {container.id[:12]}: {exc}") from None
    finally:
        container.busy = False


def _pump(
    sock: socket.socket,
    outgoing: bytes,
    splitter: _FrameSplitter,
    deadline: float,
    on_deadline: Callable[[], None],
) -> bool:
    """Write stdin and read frames until both exit reports or the end of the stream.

    Returns True when the deadline struck (the container has then been killed).
    """
    sock.setblocking(False)
    timed_out = False
    hard_deadline = deadline + _KILL_GRACE_S
    selector = selectors.DefaultSelector()
    view = memoryview(outgoing)
    selector.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE)
    try:
        while not splitter.finished():
            now = time.monotonic()
            if not timed_out and now >= deadline:
                timed_out = True
                on_deadline()
            if timed_out and now >= hard_deadline:
                break  # the engine never closed the stream; the caller removes the container
            wait_until = hard_deadline if timed_out else deadline
            for _key, mask in selector.select(timeout=max(0.0, wait_until - now)):
                if mask & selectors.EVENT_WRITE and view:
                    view = _send_some(sock, view)
                    if not view:
                        # The request said how much stdin follows: the launcher closes the
                        # program's stdin itself, and the connection stays open for a reset.
                        selector.modify(sock, selectors.EVENT_READ)
                if mask & selectors.EVENT_READ:
                    try:
                        chunk = sock.recv(_RECV_BYTES)
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError:
                        chunk = b""
                    if not chunk:
                        return timed_out
                    splitter.feed(chunk)
    finally:
        selector.close()
    return timed_out


def _send_some(sock: socket.socket, view: memoryview) -> memoryview:
    try:
        sent = sock.send(view[:65536])
    except (BlockingIOError, InterruptedError):
        return view
    except OSError:
        return memoryview(b"")  # the program closed its stdin early; that is its business
    return view[sent:]


class _Stream:
    """One output stream: a capped buffer plus a small tail that watches for the exit report."""

    def __init__(self, cap: int, nonce: str) -> None:
        self.buffer = CappedBuffer(cap)
        self._nonce = nonce.encode()
        self._tail = bytearray()
        self.report: tuple[int, bool, bool] | None = None
        # What the launcher's report says each part used, microseconds (launcher, entrypoint, program).
        self.cpu_us: tuple[int, int, int] | None = None

    def endswith(self, marker: bytes) -> bool:
        return self._tail.endswith(marker)

    def feed(self, data: bytes) -> None:
        self.buffer.feed(data)
        self._tail += data[-_REPORT_MAX:]
        del self._tail[:-_REPORT_MAX]
        if data.endswith(b"\x00"):
            match = _REPORT.search(self._tail)
            if match is not None and match.group(1) == self._nonce:
                self.report = (int(match.group(2)), match.group(3) == b"1", match.group(4) == b"1")
                if match.group(5) is not None:
                    self.cpu_us = (int(match.group(5)), int(match.group(6)), int(match.group(7)))
                self.buffer.drop_tail(len(match.group(0)))


class _FrameSplitter:
    """Docker's attach stream multiplexes stdout and stderr in frames: an 8-byte header
    (stream id, 3 zero bytes, big-endian length) then the payload. Parsed incrementally, so
    memory stays at one receive buffer however much the program prints."""

    def __init__(self, streams: dict[int, _Stream]) -> None:
        self._streams = streams
        self._header = bytearray()
        self._stream = 0
        self._remaining = 0

    def finished(self) -> bool:
        return all(stream.report is not None for stream in self._streams.values())

    def feed(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            if self._remaining == 0:
                need = 8 - len(self._header)
                self._header += view[:need]
                view = view[need:]
                if len(self._header) < 8:
                    return
                self._stream = self._header[0]
                self._remaining = int.from_bytes(self._header[4:8], "big")
                self._header.clear()
                continue
            part = view[: self._remaining]
            view = view[self._remaining :]
            self._remaining -= len(part)
            stream = self._streams.get(self._stream)
            if stream is not None:
                stream.feed(bytes(part))
