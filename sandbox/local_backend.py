"""The fallback backend: a fresh host ``python3`` process per call, fenced in as far as the host allows.

Layers, each used only when this machine supports it (probed once, see :func:`probe_isolation`):

* namespaces via ``unshare``: a private network (no interfaces but a downed loopback); a private
  PID namespace whose init is a shell that waits for the program and then exits, which kills
  every descendant, even one that called ``setsid``; a private mount namespace with a sized
  tmpfs on /tmp (the working directory), a tiny /dev/shm, /sys hidden, the root read-only;
* all capabilities dropped and no-new-privileges (``setpriv``), so uid 0 cannot remount or escape;
* cgroup v1 ``pids`` and ``memory`` groups per call (needs root): a fork bomb is contained and
  an out-of-memory kill is recorded;
* rlimits: CPU seconds, address space (``MemoryError`` in the program), file size, processes;
* a scrubbed environment and its own session / process group, killed as a whole at the timeout.

It still shares the host kernel, its users and its Python installation (the host's libraries,
not the image's pinned ones), so it isolates less than the docker backend; ``describe()`` says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import logging
import math
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox.api import ExecResult, Limits, SandboxError
from sandbox.output import CappedBuffer
from sandbox.program import resolve_argv

log = logging.getLogger(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup")
CGROUP_PARENT = "proctor-local"
_READ_CHUNK = 64 * 1024
# Runs as the PID namespace's first process: builds the private mounts, then runs the program.
_NAMESPACE_INIT = r"""
set -e
mount -t tmpfs -o "size=$1,mode=1777,nosuid,nodev" proctor-tmp /tmp
mount -t tmpfs -o size=1m,mode=1777,nosuid,nodev proctor-shm /dev/shm
mount -t tmpfs -o ro,size=4k proctor-nosys /sys
mount -o remount,bind,ro /
cd /tmp
shift
set +e
# No exec: the program must not be the namespace's init, which ignores signals from inside
# (even its own SIGKILL); this shell stays PID 1 and passes the status on (128+N for signal N).
setpriv --no-new-privs --bounding-set=-all --inh-caps=-all -- "$@"
exit $?
"""
_NAMESPACE_PREFIX = ["unshare", "--net", "--pid", "--fork", "--mount-proc", "--kill-child"]
MEMORY_ERROR_MARK = "MemoryError"
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Isolation:
    """What this host lets the local backend use."""

    namespaces: bool
    net_only_namespace: bool
    cgroups: bool

    def notes(self) -> list[str]:
        notes = ["reduced isolation: host kernel, host users and host Python; not the pinned image"]
        if self.namespaces:
            notes.append("private network, PID and mount namespaces; read-only root; tmpfs /tmp")
        elif self.net_only_namespace:
            notes.append("private network namespace only; files written land in a host temp dir")
        else:
            notes.append("no namespaces: the program can reach the network and the host filesystem")
        notes.append("cgroup pids, memory and CPU limits" if self.cgroups else "no cgroups: rlimits only")
        return notes


@functools.cache
def probe_isolation() -> Isolation:
    """Try each isolation layer once with a no-op program; remember what worked."""
    full = _runs([*_NAMESPACE_PREFIX, "sh", "-c", _NAMESPACE_INIT, "sh", "1m", "true"])
    net_only = not full and _runs(["unshare", "--net", "true"])
    return Isolation(namespaces=full, net_only_namespace=net_only, cgroups=_cgroups_writable())


def _runs(argv: list[str]) -> bool:
    if shutil.which(argv[0]) is None:
        return False
    try:
        return subprocess.run(argv, capture_output=True, timeout=10, cwd="/").returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _cgroups_writable() -> bool:
    for controller in ("pids", "memory"):
        parent = CGROUP_ROOT / controller / CGROUP_PARENT
        try:
            parent.mkdir(exist_ok=True)
        except OSError:
            return False
        if not os.access(parent, os.W_OK):
            return False
    return True


def kill_cgroup_and_remove(directory: Path, deadline: float) -> bool:
    """SIGKILL every process in a cgroup until it is empty (or the deadline passes), then remove it.

    Killing repeats because a process may fork between reading ``cgroup.procs`` and the kill.
    Returns whether the cgroup directory is gone.
    """
    while time.monotonic() < deadline:
        try:
            pids = [int(p) for p in (directory / "cgroup.procs").read_text().split()]
        except OSError:
            break
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)
    try:
        directory.rmdir()
    except OSError:
        return False
    return True


class CallCgroups:
    """Per-call cgroup v1 groups: ``pids`` and ``memory`` always, ``cpu`` (the CPU quota) when
    that controller is writable too. Killed and removed afterwards."""

    CFS_PERIOD_US = 100_000

    def __init__(self, limits: Limits) -> None:
        name = f"call-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self.pids_dir = CGROUP_ROOT / "pids" / CGROUP_PARENT / name
        self.memory_dir = CGROUP_ROOT / "memory" / CGROUP_PARENT / name
        self.dirs: list[Path] = []
        try:
            self._make(self.pids_dir, {"pids.max": str(limits.pids)})
            self._make(self.memory_dir, {"memory.limit_in_bytes": str(limits.memory_bytes)})
            # Without swap accounting this file is absent; the plain limit then already holds.
            with contextlib.suppress(OSError):
                (self.memory_dir / "memory.memsw.limit_in_bytes").write_text(str(limits.memory_bytes))
            cpu_parent = CGROUP_ROOT / "cpu" / CGROUP_PARENT
            with contextlib.suppress(OSError):
                cpu_parent.mkdir(exist_ok=True)
                quota = max(1000, int(limits.cpus * self.CFS_PERIOD_US))
                self._make(
                    cpu_parent / name,
                    {"cpu.cfs_period_us": str(self.CFS_PERIOD_US), "cpu.cfs_quota_us": str(quota)},
                )
        except BaseException:
            self.kill_all_and_remove()
            raise

    def _make(self, directory: Path, settings: dict[str, str]) -> None:
        directory.mkdir()
        self.dirs.append(directory)
        for key, value in settings.items():
            (directory / key).write_text(value)

    def join_self(self) -> None:
        """Called in the child between fork and exec, so nothing escapes before it joins."""
        pid = str(os.getpid())
        for directory in self.dirs:
            (directory / "cgroup.procs").write_text(pid)

    def oom_killed(self) -> bool:
        try:
            for line in (self.memory_dir / "memory.oom_control").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value) > 0
        except OSError:
            pass
        return False

    def kill_all_and_remove(self) -> None:
        deadline = time.monotonic() + 5.0
        for directory in self.dirs:
            kill_cgroup_and_remove(directory, deadline)


def _scrubbed_env(home: str, python: str, cpus: float) -> dict[str, str]:
    # Only what a Python program needs; nothing of the host (keys, tokens) crosses over.
    threads = str(max(1, math.floor(cpus)))
    return {
        "PATH": os.pathsep.join([str(Path(python).parent), "/usr/local/bin", "/usr/bin", "/bin"]),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": home,
        "TMPDIR": home,
        "PYTHONIOENCODING": "utf-8",
        "OMP_NUM_THREADS": threads,
        "OPENBLAS_NUM_THREADS": threads,
        "MKL_NUM_THREADS": threads,
        "NUMBA_CACHE_DIR": os.path.join(home, ".numba"),
    }


def _make_preexec(limits: Limits, timeout: float, cgroups: CallCgroups | None) -> Callable[[], None]:
    cpu_seconds = math.ceil(timeout * max(1.0, limits.cpus)) + 1

    def preexec() -> None:
        # If the controlling process dies (even by SIGKILL) the sandbox dies with it.
        _set_parent_death_signal(signal.SIGKILL)
        if cgroups is not None:
            cgroups.join_self()
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_size_bytes, limits.file_size_bytes))
        # Not enforced for uid 0; the pids cgroup covers that case.
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.pids, limits.pids))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return preexec


def _set_parent_death_signal(sig: int) -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the cleanup command covers this case


def exit_code_of(returncode: int) -> int:
    """Shell convention: death by signal N is 128 + N, as docker reports it."""
    return 128 - returncode if returncode < 0 else returncode


class LocalSandbox:
    """Runs each call in a fresh host process; see the module docstring for what fences it in."""

    backend = "local"

    def __init__(
        self,
        default_limits: Limits | None = None,
        python: str | None = None,
        fallback_reason: str | None = None,
    ) -> None:
        self.default_limits = default_limits or Limits()
        # Why "auto" chose this backend instead of docker; None when it was asked for.
        self.fallback_reason = fallback_reason
        self.python = python or sys.executable
        self.isolation = probe_isolation()
        self._closed = False

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "image": None,
            "image_id": None,
            "python": self.python,
            "python_version": sys.version.split()[0],
            "isolation": "reduced",
            "isolates_less": True,
            "notes": self.isolation.notes(),
            "fallback_reason": self.fallback_reason,
            "limits": self.default_limits.__dict__,
        }

    async def aclose(self) -> None:
        self._closed = True

    async def exec(
        self,
        code: str | None = None,
        *,
        argv: Sequence[str] | None = None,
        stdin: str | bytes | None = None,
        timeout: float = 30.0,
        limits: Limits | None = None,
    ) -> ExecResult:
        if self._closed:
            raise SandboxError("this sandbox has been closed")
        try:
            program = resolve_argv(code, argv, self.python)
        except ValueError as exc:
            raise SandboxError(str(exc)) from exc
        limits = limits or self.default_limits
        stdin_bytes = stdin.encode("utf-8") if isinstance(stdin, str) else stdin
        host_dir = tempfile.mkdtemp(prefix="proctor-local-")
        cgroups: CallCgroups | None = None
        try:
            if self.isolation.cgroups:
                cgroups = CallCgroups(limits)
            if self.isolation.namespaces:
                # Inside the namespace /tmp is a fresh tmpfs; the host dir is only the start cwd.
                home = "/tmp"
                command = [*_NAMESPACE_PREFIX, "sh", "-c", _NAMESPACE_INIT, "sh", str(limits.tmpfs_bytes)]
                command += program
            else:
                home = host_dir
                prefix = ["unshare", "--net"] if self.isolation.net_only_namespace else []
                command = prefix + program
            return await self._run(command, home, host_dir, stdin_bytes, timeout, limits, cgroups)
        finally:
            if cgroups is not None:
                await asyncio.shield(asyncio.to_thread(cgroups.kill_all_and_remove))
            shutil.rmtree(host_dir, ignore_errors=True)

    async def _run(
        self,
        command: list[str],
        home: str,
        host_dir: str,
        stdin_bytes: bytes | None,
        timeout: float,
        limits: Limits,
        cgroups: CallCgroups | None,
    ) -> ExecResult:
        started = time.monotonic()
        try:
            process = await asyncio.create_subprocess_exec(
                *command,
                stdin=asyncio.subprocess.PIPE if stdin_bytes is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=host_dir,
                env=_scrubbed_env(home, self.python, limits.cpus),
                start_new_session=True,
                preexec_fn=_make_preexec(limits, timeout, cgroups),
            )
        except OSError as exc:
            raise SandboxError(f"could not start the local sandbox process: {exc}") from exc
        stdout = CappedBuffer(limits.output_bytes)
        stderr = CappedBuffer(limits.output_bytes)
        assert process.stdout is not None and process.stderr is not None
        readers = [
            asyncio.create_task(_drain(process.stdout, stdout)),
            asyncio.create_task(_drain(process.stderr, stderr)),
        ]
        feeder = asyncio.create_task(_feed(process, stdin_bytes))
        timed_out = False
        try:
            try:
                await asyncio.wait_for(process.wait(), timeout)
            except TimeoutError:
                timed_out = True
        finally:
            # Normal exit, timeout, cancellation: the whole group goes, stragglers included.
            _kill_group(process.pid)
            if cgroups is not None:
                await asyncio.shield(asyncio.to_thread(cgroups.kill_all_and_remove))
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await asyncio.shield(_settle(process, readers, feeder))
        duration = time.monotonic() - started
        assert process.returncode is not None
        stderr_text = stderr.text()
        memory_error = _died_of_memory_error(process.returncode, stderr_text)
        return ExecResult(
            exit_code=None if timed_out else exit_code_of(process.returncode),
            stdout=stdout.text(),
            stderr=stderr_text,
            timed_out=timed_out,
            oom_killed=(cgroups.oom_killed() if cgroups is not None else False) or memory_error,
            stdout_truncated=stdout.truncated,
            stderr_truncated=stderr.truncated,
            duration_s=duration,
            backend=self.backend,
            image=None,
        )


async def _drain(stream: asyncio.StreamReader, sink: CappedBuffer) -> None:
    while chunk := await stream.read(_READ_CHUNK):
        sink.feed(chunk)


async def _feed(process: asyncio.subprocess.Process, data: bytes | None) -> None:
    if data is None or process.stdin is None:
        return
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        process.stdin.write(data)
        await process.stdin.drain()
        process.stdin.close()


async def _settle(
    process: asyncio.subprocess.Process, readers: list[asyncio.Task[None]], feeder: asyncio.Task[None]
) -> None:
    await process.wait()
    # A pipe can stay open only through a process that escaped every fence; do not wait forever.
    _done, pending = await asyncio.wait([*readers, feeder], timeout=2.0)
    for task in pending:
        task.cancel()


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _died_of_memory_error(returncode: int, stderr: str) -> bool:
    # Under RLIMIT_AS an allocation fails instead of the kernel killing the process, so the
    # program dies of an uncaught MemoryError: the same event as an OOM kill, reported as one.
    if returncode == 0:
        return False
    tail = stderr.rstrip().rsplit("\n", 1)[-1]
    return tail.startswith(MEMORY_ERROR_MARK)
