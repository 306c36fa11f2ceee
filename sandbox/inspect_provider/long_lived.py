"""One hardened container that lives as long as an Inspect sample, and runs many programs.

Proctor's own calls each get a fresh container (sandbox/docker/containers.py). Inspect's tools assume
the opposite: files a sample's first call writes are there for its next. This module keeps one
container per sample with exactly the docker backend's settings (:func:`container_settings`:
Proctor's seccomp allowlist, no network, read-only root with bounded tmpfs ``/tmp`` and
``/work``, memory without swap, pids and CPU limits, its own host-counter files, labels the
sweep finds), with three changes a long-lived container needs:

- no launcher: its first process is the image's entrypoint then ``sleep infinity``, run as the
  sandbox's own non-root uid, and every program comes in through ``docker exec``;
- no capabilities at all (the launcher's SETUID/SETGID/KILL are for demoting, which no one
  does here): ``docker exec`` processes get the container's uid, its empty capability set,
  no-new-privileges and its seccomp allowlist;
- every exec starts in a pinned wrapper (:data:`WRAPPER`, by absolute path, never the image's
  PATH) that installs Proctor's denylist filter on top (sandbox/docker/seccomp.py, as the launcher
  does in each process it demotes), and under runsc the process limit, then execs GNU
  ``timeout``: the program and its children form one process group that the timeout, or the
  controller on a cancelled or overflowing call, kills whole.

Nothing here imports Inspect: the provider (provider.py) maps these outcomes to its errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from docker.errors import DockerException

from proctor.sandbox.api import RUNC, SandboxError, SandboxUnavailable
from proctor.sandbox.docker import host_counters, socket_memory
from proctor.sandbox.docker.backend import image_entrypoint, resolve_image, sandbox_user
from proctor.sandbox.docker.containers import (
    WORKDIR,
    container_settings,
    container_uid,
    own_counters,
    remove_container,
)
from proctor.sandbox.docker.labels import container_labels
from proctor.sandbox.docker.runtimes import Engine, connect_engine_for, program_process_limit
from proctor.sandbox.docker.seccomp import filters_by_machine
from proctor.sandbox.inspect_provider.config import ProviderConfig

# proctor.role of these containers (sandbox/docker/labels.py): the sweep treats them like any other.
ROLE = "inspect-sample"
IDLE = ["/usr/bin/sleep", "infinity"]
PYTHON = "/usr/bin/python3"
TIMEOUT = "/usr/bin/timeout"
# Seconds GNU timeout waits after SIGTERM before SIGKILL; and the controller's margin beyond
# the in-container timeout before it gives up on the engine itself.
KILL_AFTER_S = 2
HOST_MARGIN_S = 10.0
# How long a kill of an exec's process group (itself a `docker exec`) may take.
KILL_WAIT_S = 30.0
# The wrapper's first words on stderr: its pid, which is the program's process group.
_ANNOUNCE = re.compile(rb"\A\x00proctor-exec:(\d+)\x00")
_ANNOUNCE_MAX = 40
_READ_CHUNK = 256 * 1024

# Runs as the sandbox user before the program: says its pid, bounds processes (runsc), installs
# the denylist filter (no_new_privs first, as seccomp requires without CAP_SYS_ADMIN), then
# becomes GNU timeout, which makes this pid a process-group leader and runs the program in it.
WRAPPER = """\
import ctypes, json, os, resource, sys
os.write(2, b'\\x00proctor-exec:%d\\x00' % os.getpid())
filters, nproc, seconds = json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
machine = os.uname().machine
if machine not in filters:
    os.write(2, ('proctor: no seccomp filter for this machine (%s)\\n' % machine).encode())
    os._exit(125)
if nproc:
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
program = bytes.fromhex(filters[machine])
class Fprog(ctypes.Structure):
    _fields_ = [('len', ctypes.c_ushort), ('filter', ctypes.c_char_p)]
libc = ctypes.CDLL(None, use_errno=True)
fprog = Fprog(len(program) // 8, program)
if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:
    os.write(2, b'proctor: cannot install the seccomp filter\\n')
    os._exit(125)
os.execv('/usr/bin/timeout', ['/usr/bin/timeout', '-k', sys.argv[4], seconds + 's', *sys.argv[5:]])
"""
KILL_GROUP = "import os, sys\ntry:\n    os.killpg(int(sys.argv[1]), 9)\nexcept OSError:\n    pass\n"


class ContainerUnavailable(SandboxError):
    """The exec never reached the container (it is gone, or the engine refused)."""


@dataclass
class ExecOutcome:
    """What one exec did. ``exit_code`` is the program's, or GNU timeout's (124: timed out)."""

    exit_code: int
    stdout: bytes
    stderr: bytes
    # A stream passed ``output_limit``: the program was killed, the streams hold the first bytes.
    overflowed: bool
    timed_out: bool
    duration_s: float


def _docker_cli() -> str:
    found = shutil.which("docker")
    if found is None:
        raise SandboxUnavailable("the proctor Inspect provider needs the docker command line")
    return found


class LongLivedContainer:
    """A started container of one sample; :meth:`exec` runs a program in it."""

    def __init__(self, engine: Engine, container_id: str, uid: int, gid: int, nproc: int) -> None:
        self.engine = engine
        self.id = container_id
        self.uid = uid
        self.gid = gid
        self._nproc = nproc
        self._docker = _docker_cli()
        self._filters = json.dumps(filters_by_machine(), separators=(",", ":"))

    @property
    def user(self) -> str:
        return f"{self.uid}:{self.gid}"

    def _cli(self, *args: str) -> list[str]:
        return [self._docker, "-H", self.engine.url, *args]

    async def exec(
        self,
        argv: Sequence[str],
        *,
        stdin: bytes | None = None,
        cwd: str = WORKDIR,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        output_limit: int,
    ) -> ExecOutcome:
        """Run ``argv`` (resolved through the container's PATH) as the sandbox user in ``cwd``.

        Each of stdout and stderr keeps at most ``output_limit`` bytes; one that passes it ends
        the call (``overflowed``) and its process group is killed. ``timeout`` bounds the
        program's wall-clock time inside the container; the controller adds its own margin."""
        if not argv:
            raise ValueError("exec needs a command")
        env_flags = [part for key, value in (env or {}).items() for part in ("--env", f"{key}={value}")]
        seconds = "0" if timeout is None else f"{max(timeout, 0.001):g}"
        command = self._cli(
            "exec", "-i", "--workdir", cwd, *env_flags, self.id,
            PYTHON, "-I", "-S", "-c", WRAPPER, self._filters, str(self._nproc), seconds, f"{KILL_AFTER_S}s",
            *argv,
        )  # fmt: skip
        started = time.monotonic()
        process = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        overflow = asyncio.Event()
        assert process.stdout is not None and process.stderr is not None
        stdout = _CappedStream(output_limit, overflow)
        stderr = _CappedStream(output_limit + _ANNOUNCE_MAX, overflow)
        feeder = asyncio.create_task(_feed(process, stdin))
        # Concurrently: a program filling one pipe must not wait for us to drain the other.
        finished = asyncio.gather(stdout.read(process.stdout), stderr.read(process.stderr), process.wait())
        overflowed = asyncio.create_task(overflow.wait())
        host_deadline = None if timeout is None else timeout + KILL_AFTER_S + HOST_MARGIN_S
        host_timed_out = False
        waiters: set[asyncio.Future[Any]] = {finished, overflowed}
        try:
            done, _ = await asyncio.wait(waiters, timeout=host_deadline, return_when=asyncio.FIRST_COMPLETED)
            host_timed_out = not done
        finally:
            if not finished.done():
                # Cancelled, overflowing or past the controller's own deadline: the docker client
                # going away does not stop the program, so its group is killed inside.
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                # Shielded: a call being cancelled still waits for its program to be killed.
                await asyncio.shield(self._kill_group(stderr.announced_pid()))
            for task in (overflowed, feeder):
                task.cancel()
        if not finished.done():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(finished, 10)
        out = bytes(stdout.kept)
        err = bytes(stderr.kept)
        announced = _ANNOUNCE.match(err)
        if announced is None:
            text = err.decode("utf-8", "replace").strip().splitlines()
            raise ContainerUnavailable(
                f"container {self.id[:12]}: the exec did not start: {text[-1] if text else 'no reason given'}"
            )
        err = err[announced.end() :]
        code = process.returncode if process.returncode is not None else -9
        elapsed = time.monotonic() - started
        timed_out = host_timed_out or (
            timeout is not None and (code == 124 or (code in (137, 143) and elapsed >= timeout))
        )
        over = overflow.is_set()
        return ExecOutcome(
            code, out[:output_limit], err[:output_limit], over, timed_out and not over, elapsed
        )

    async def _kill_group(self, pid: int | None) -> None:
        """Kill the exec's process group inside the container, and wait for the kill to be done,
        so a call that ends early leaves nothing running. Best effort: if even this fails, the
        sample's container goes at sample_cleanup, or with the sweep."""
        if pid is None:
            return
        with contextlib.suppress(Exception):
            killer = await asyncio.create_subprocess_exec(
                *self._cli("exec", self.id, PYTHON, "-I", "-S", "-c", KILL_GROUP, str(pid)),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
                start_new_session=True,
            )
            await asyncio.wait_for(killer.wait(), KILL_WAIT_S)

    def remove(self) -> None:
        """Kill and remove the container and its counter files (blocking)."""
        try:
            remove_container(self.engine.client.api, self.id)
        finally:
            host_counters.release(self.id)


class _CappedStream:
    """One stream's first ``limit`` bytes (and one more: proof it went past), readable while the
    call runs, so a cancelled call still learns the wrapper's pid from the head of stderr."""

    def __init__(self, limit: int, overflow: asyncio.Event) -> None:
        self.limit = limit
        self.kept = bytearray()
        self._overflow = overflow

    async def read(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(_READ_CHUNK):
            self.kept += chunk[: self.limit + 1 - len(self.kept)]
            if len(self.kept) > self.limit:
                self._overflow.set()
                return

    def announced_pid(self) -> int | None:
        match = _ANNOUNCE.match(bytes(self.kept[:_ANNOUNCE_MAX]))
        return int(match.group(1)) if match else None


async def _feed(process: asyncio.subprocess.Process, data: bytes | None) -> None:
    assert process.stdin is not None
    # A program that exits without reading its input closes the pipe: not an error of the call.
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        if data:
            process.stdin.write(data)
            await process.stdin.drain()
        process.stdin.close()
        await process.stdin.wait_closed()


def check_engine_and_image(config: ProviderConfig) -> None:
    """``SandboxUnavailable`` in one line unless the engine, runtime and image are all there."""
    engine = connect_engine_for(config.spec.runtime, config.spec.docker_host)
    try:
        resolve_image(engine.client, config.spec.image, engine.url)
    finally:
        engine.client.close()


def start_container(config: ProviderConfig, run_id: str) -> LongLivedContainer:
    """Create and start a sample's container (blocking: call it in a thread).

    ``SandboxUnavailable`` in one line when the engine, runtime or image is missing."""
    spec = config.spec
    engine = connect_engine_for(spec.runtime, spec.docker_host)
    client = engine.client
    api = client.api
    image, image_id = resolve_image(client, spec.image, engine.url)
    image_user = sandbox_user(client, image_id)
    gid = int(image_user.partition(":")[2] or image_user.partition(":")[0])
    uid = container_uid()
    limits = config.limits
    counters = own_counters(api, limits, spec.runtime, run_id)
    settings = container_settings(
        api, limits, container_labels(run_id, ROLE), image_user, None, spec.runtime, uid, False, counters
    )
    settings.update(
        # The image's entrypoint prepares the tmpfs (the pinned image links numba's cache), then
        # execs the idle process; docker-init (init=True) is PID 1 and reaps what execs leave.
        entrypoint=[*image_entrypoint(client, image_id), *IDLE],
        command=[],
        user=f"{uid}:{gid}",
        detach=True,
        stdin_open=False,
    )
    host_config = settings["host_config"]
    host_config.pop("CapAdd", None)  # the launcher's capabilities: nobody here demotes anything
    if config.network:
        host_config["NetworkMode"] = "bridge"
        settings["network_disabled"] = False
    try:
        created = api.create_container(image, **settings)
    except BaseException:
        if counters is not None:
            shutil.rmtree(counters, ignore_errors=True)
        raise
    container_id: str = created["Id"]
    if counters is not None:
        host_counters.adopt(container_id, counters)
    nproc = program_process_limit(spec.runtime, limits) or 0
    started = LongLivedContainer(engine, container_id, uid, gid, nproc)
    try:
        api.start(container_id)
        if spec.runtime == RUNC:
            # Before any program runs, as the docker backend does: socket buffers count and are
            # bounded in the container's memory group (sandbox/docker/socket_memory.py).
            pid = int(api.inspect_container(container_id).get("State", {}).get("Pid") or 0)
            try:
                socket_memory.limit_container(pid, container_id)
            except OSError as exc:
                raise SandboxError(
                    f"container {container_id[:12]}: cannot bound its socket buffers: {exc}"
                ) from None
    except BaseException:
        with contextlib.suppress(DockerException):
            started.remove()
        raise
    return started
