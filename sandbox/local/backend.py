"""The local backend: each call in a fresh bubblewrap sandbox on the host, as an unprivileged uid.

Chosen only explicitly (``--backend local``); it isolates less than the docker backend and
``describe()`` says so. What fences a call in (see :mod:`proctor.sandbox.local.bwrap` for the sandbox itself):

* bubblewrap: own user, mount, pid, network, IPC, UTS and cgroup namespaces; a fresh host uid
  per call (never 0), no groups, no capabilities, no-new-privileges; a read-only view of /usr
  and the interpreter only; bwrap's minimal /dev and a private /proc; a sized tmpfs on /tmp
  (also the working directory and HOME) as the only writable place;
* cgroup v1 ``pids``, ``memory`` and ``cpu`` groups per call, joined before the program exists
  (needs root): a fork bomb is contained, an out-of-memory kill is recorded, socket buffers are
  counted and bounded (:mod:`proctor.sandbox.docker.socket_memory`);
* rlimits inside as a second line: CPU seconds, address space, file size, processes, open files;
* the wall clock, enforced from outside: at the deadline the host SIGKILLs everything in the
  call's cgroups and bwrap itself, whose pid namespace then takes every descendant with it.

It still shares the host kernel and runs the host's Python and libraries (not the pinned
image). bubblewrap is required: without it (or without user namespaces) the backend refuses.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import resource
import signal
import subprocess
import sys
import time
import uuid
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from proctor.sandbox.api import (
    OPEN_FILES,
    ExecResult,
    InvalidProgram,
    Limits,
    SandboxError,
    SandboxUnavailable,
)
from proctor.sandbox.docker import socket_memory
from proctor.sandbox.local import bwrap
from proctor.sandbox.output import CappedBuffer
from proctor.sandbox.program import Program, resolve_program
from proctor.sandbox.reaper import BACKSTOP_GRACE_S

log = logging.getLogger(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup")
CGROUP_PARENT = "proctor-local"
_READ_CHUNK = 64 * 1024
MEMORY_ERROR_MARK = "MemoryError"
LOCAL_WARNING = (
    "warning: sandbox backend 'local' isolates less than docker: bubblewrap on the host kernel, "
    "the host's Python and libraries, not the pinned image"
)
# Extra processes in a call besides the program: bwrap outside and the sandbox's init (bwrap.INIT).
_BWRAP_PROCESSES = 2


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
    """Per-call cgroup v1 groups: ``pids`` and ``memory`` always, ``cpu`` (the CPU quota) and
    ``cpuacct`` (the call's CPU time) when those controllers are writable too. Killed and removed
    afterwards."""

    CFS_PERIOD_US = 100_000

    def __init__(self, limits: Limits) -> None:
        name = f"call-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self.pids_dir = CGROUP_ROOT / "pids" / CGROUP_PARENT / name
        self.memory_dir = CGROUP_ROOT / "memory" / CGROUP_PARENT / name
        self.dirs: list[Path] = []
        # Read before the memory group is removed (its counters go with it) and kept after.
        self._oom_seen = False
        self.cpuacct_dir: Path | None = None
        self._cpu_us: int | None = None
        try:
            self._make(self.pids_dir, {"pids.max": str(limits.pids)})
            self._make(self.memory_dir, {"memory.limit_in_bytes": str(limits.memory_bytes)})
            # Socket buffers count towards no group until this is written (sandbox/docker/socket_memory.py).
            socket_memory.limit_group(self.memory_dir)
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
            cpuacct_parent = CGROUP_ROOT / "cpuacct" / CGROUP_PARENT
            with contextlib.suppress(OSError):
                cpuacct_parent.mkdir(exist_ok=True)
                self._make(cpuacct_parent / name, {})
                self.cpuacct_dir = cpuacct_parent / name
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
        """Whether the kernel's OOM killer struck in this call's memory group.

        The count lives in the group, so it is read before :meth:`kill_all_and_remove` takes
        the group away (the call's result is built after that) and remembered.
        """
        if not self._oom_seen:
            try:
                for line in (self.memory_dir / "memory.oom_control").read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        self._oom_seen = int(value) > 0
            except (OSError, ValueError):
                pass
        return self._oom_seen

    def cpu_us(self) -> int | None:
        """CPU every process of the call used (bwrap, the sandbox's init, the program and all it
        started), in microseconds: the group's own count, read once it holds no process, before
        it is removed, and kept after. None without a ``cpuacct`` group."""
        if self._cpu_us is None and self.cpuacct_dir is not None:
            with contextlib.suppress(OSError, ValueError):
                self._cpu_us = int((self.cpuacct_dir / "cpuacct.usage").read_text()) // 1000
        return self._cpu_us

    def kill_all_and_remove(self) -> None:
        deadline = time.monotonic() + 5.0
        for directory in self.dirs:
            if directory == self.memory_dir:
                # The pids group comes first: once it is empty every process of the call is
                # dead, so no OOM kill can come after this read.
                self.oom_killed()
            elif directory == self.cpuacct_dir:
                # Likewise no more CPU can be used by then.
                self.cpu_us()
            kill_cgroup_and_remove(directory, deadline)


def _scrubbed_env(python: str, cpus: float) -> dict[str, str]:
    # Only what a Python program needs; nothing of the host (keys, tokens) crosses over.
    threads = str(max(1, math.floor(cpus)))
    home = "/tmp"
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
        # numba sizes its parallel=True pool by the host CPUs, not the quota; beyond the quota
        # its threads only get throttled.
        "NUMBA_NUM_THREADS": threads,
        "NUMBA_CACHE_DIR": os.path.join(home, ".numba"),
    }


def _limits_setter(limits: Limits, timeout: float, cgroups: CallCgroups | None) -> Callable[[], None]:
    """Runs in the forked child before it drops privileges: join the cgroups, set rlimits."""
    cpu_seconds = math.ceil(timeout * max(1.0, limits.cpus)) + 1
    nproc = limits.pids + _BWRAP_PROCESSES

    def apply() -> None:
        if cgroups is not None:
            cgroups.join_self()
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_size_bytes, limits.file_size_bytes))
        # Counted per host uid, and every call has a uid of its own.
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        # Otherwise the program inherits Proctor's own (20000 here, often far more) and may raise
        # its soft limit to it: pids x that many files can fill the host's whole file table.
        resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES, OPEN_FILES))

    return apply


def exit_code_of(returncode: int) -> int:
    """Shell convention: death by signal N is 128 + N, as docker reports it."""
    return 128 - returncode if returncode < 0 else returncode


LIBRARY_PROBE = """
import importlib, importlib.metadata, json, sys
found = {}
for name in sys.argv[1:]:
    try:
        importlib.import_module(name.replace("-", "_"))
        found[name] = importlib.metadata.version(name)
    except Exception:
        pass
print(json.dumps(found))
"""


class LocalSandbox:
    """Runs each call in a fresh bubblewrap sandbox; see the module docstring for the fences.

    Raises :class:`SandboxUnavailable` (one line, with the fix) when bubblewrap is missing or
    cannot build its namespaces here: this backend never runs a program unsandboxed.
    """

    backend = "local"

    def __init__(self, default_limits: Limits | None = None, python: str | None = None) -> None:
        self.default_limits = default_limits or Limits()
        self.python = python or sys.executable
        self._bwrap = bwrap.find_bwrap()
        self._privileged = os.geteuid() == 0
        self._cgroups = self._privileged and _cgroups_writable()
        self._layout = bwrap.Layout.create(bwrap.interpreter_prefixes(self.python))
        # Removed by aclose(), or at garbage collection / interpreter exit if nobody closes it.
        self._remove_layout = weakref.finalize(self, self._layout.remove)
        failure = bwrap.probe(self._bwrap, self._layout, self.python)
        if failure is not None:
            self._remove_layout()
            raise SandboxUnavailable(
                f"bubblewrap cannot build its sandbox here ({failure}): {bwrap.INSTALL_HINT}"
            )
        # Which of the pinned libraries import here, with their versions; see probe_libraries.
        self.libraries: dict[str, str] | None = None
        self._closed = False

    def notes(self) -> list[str]:
        notes = [
            "reduced isolation: the host kernel; the host Python and libraries, not the pinned image",
            "bubblewrap: own user/mount/pid/net/ipc/uts namespaces; read-only /usr and interpreter; "
            "tmpfs /tmp only writable; bwrap's own /dev and /proc; no capabilities, no-new-privileges",
            "a fresh unprivileged host uid per call"
            if self._privileged
            else "Proctor's own (unprivileged) uid",
            "cgroup pids, memory and CPU limits" if self._cgroups else "no cgroups: rlimits only",
            "a seccomp filter of Proctor's own only (no io_uring, no AF_VSOCK or other unfenced "
            "address families, no 32-bit system calls, no keyrings/bpf/perf/userfaultfd/Linux AIO); "
            "otherwise every system call of the host kernel is reachable",
        ]
        return notes

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "image": None,
            "image_id": None,
            "python": self.python,
            "python_version": sys.version.split()[0],
            "isolation": "reduced",
            # sandbox.isolation: every call a new sandbox (per-sample is docker's only).
            "call_isolation": "fresh",
            "isolates_less": True,
            "warning": LOCAL_WARNING,
            "sandbox_tool": "bubblewrap",
            "notes": self.notes(),
            "libraries": self.libraries,
            "limits": self.default_limits.__dict__,
        }

    async def probe_libraries(self, names: Sequence[str]) -> dict[str, str]:
        """Import each of ``names`` inside the sandbox; remember those that import, with versions."""
        result = await self.exec(argv=[self.python, "-I", "-c", LIBRARY_PROBE, *names], timeout=120)
        try:
            found = json.loads(result.stdout) if result.exit_code == 0 else {}
        except ValueError:
            found = {}
        self.libraries = {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}
        return self.libraries

    async def aclose(self) -> None:
        self._closed = True
        self._remove_layout()

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
            program = resolve_program(code, argv, self.python)
        except InvalidProgram:
            raise
        except ValueError as exc:
            raise SandboxError(str(exc)) from exc
        limits = limits or self.default_limits
        stdin_bytes = stdin.encode("utf-8") if isinstance(stdin, str) else stdin
        cgroups: CallCgroups | None = None
        try:
            if self._cgroups:
                cgroups = CallCgroups(limits)
            filter_fd = bwrap.seccomp_fd()
            source_fd = _source_fd(program)
            try:
                command = bwrap.bwrap_argv(
                    self._bwrap,
                    self._layout,
                    limits.tmpfs_bytes,
                    program.argv_with(source_fd if source_fd is not None else -1),
                    staged=self._privileged,
                    seccomp_fd=filter_fd,
                    python=self.python,
                    backstop_s=math.ceil(timeout + BACKSTOP_GRACE_S),
                )
                setup = bwrap.make_child_setup(
                    self._layout,
                    bwrap.pick_host_uid() if self._privileged else None,
                    _limits_setter(limits, timeout, cgroups),
                )
                passed = (filter_fd,) if source_fd is None else (filter_fd, source_fd)
                return await self._run(command, setup, stdin_bytes, timeout, limits, cgroups, passed)
            finally:
                os.close(filter_fd)
                if source_fd is not None:
                    os.close(source_fd)
        finally:
            if cgroups is not None:
                await asyncio.shield(asyncio.to_thread(cgroups.kill_all_and_remove))

    async def _run(
        self,
        command: list[str],
        setup: Callable[[], None],
        stdin_bytes: bytes | None,
        timeout: float,
        limits: Limits,
        cgroups: CallCgroups | None,
        pass_fds: tuple[int, ...],
    ) -> ExecResult:
        started = time.monotonic()
        spawn = asyncio.ensure_future(
            asyncio.create_subprocess_exec(
                *command,
                stdin=asyncio.subprocess.PIPE if stdin_bytes is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd="/",
                env=_scrubbed_env(self.python, limits.cpus),
                start_new_session=True,
                preexec_fn=setup,
                pass_fds=pass_fds,
            )
        )
        cancelled = await _finish_despite_cancellation(spawn)
        try:
            process = spawn.result()
        except (OSError, subprocess.SubprocessError) as exc:
            if cancelled:
                raise asyncio.CancelledError from exc
            raise SandboxError(f"could not start the local sandbox: {exc}") from exc
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
            if cancelled:
                raise asyncio.CancelledError
            try:
                await asyncio.wait_for(process.wait(), timeout)
            except TimeoutError:
                timed_out = True
            # A controller stalled past the deadline may find the program already ended by the
            # init's backstop: that is still the deadline's doing.
            timed_out = timed_out or time.monotonic() - started >= timeout
        finally:
            # Normal exit, timeout, cancellation: everything goes. bwrap dying takes its pid
            # namespace with it; the cgroup sweep catches anything between fork and exec.
            _kill_group(process.pid)
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            if cgroups is not None:
                await asyncio.shield(asyncio.to_thread(cgroups.kill_all_and_remove))
            await asyncio.shield(_settle(process, readers, feeder))
        duration = time.monotonic() - started
        assert process.returncode is not None
        stderr_text = stderr.text()
        memory_error = _died_of_memory_error(process.returncode, stderr_text)
        cpu_us = cgroups.cpu_us() if cgroups is not None else None
        return ExecResult(
            exit_code=None if timed_out else exit_code_of(process.returncode),
            stdout=stdout.text(),
            stderr=stderr_text,
            timed_out=timed_out,
            oom_killed=(cgroups.oom_killed() if cgroups is not None else False) or memory_error,
            stdout_truncated=stdout.truncated,
            stderr_truncated=stderr.truncated,
            duration_s=duration,
            cpu_s=cpu_us / 1e6 if cpu_us is not None else None,
            backend=self.backend,
            image=None,
        )


def _source_fd(program: Program) -> int | None:
    """Code too long for a command line (sandbox/program.py) in a memory file the program
    inherits through bwrap and its init; its bootstrap reads and closes it."""
    if program.source is None:
        return None
    fd = os.memfd_create("proctor-program", os.MFD_CLOEXEC)
    try:
        view = memoryview(program.source)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


async def _finish_despite_cancellation(spawn: asyncio.Future[Any]) -> bool:
    """Await ``spawn`` to its end even when the caller is cancelled; True if it was.

    Cancelling ``asyncio.create_subprocess_exec`` while it connects the child's pipes never
    returns on CPython 3.11: it kills the child, then waits for an exit that is only reported
    once every pipe is connected, and they never will be. The sandbox it started was then left
    running. So the spawn always finishes, and the cancelled caller ends the process like any
    cancelled call.
    """
    cancelled = False
    while not spawn.done():
        try:
            await asyncio.shield(spawn)
        except asyncio.CancelledError:
            cancelled = True
        except BaseException:  # the spawn's own failure: the caller reads it from the future
            break
    return cancelled


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
