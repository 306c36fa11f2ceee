"""``runc run`` started with chosen descriptors at 0 to 3, and waited for like a Popen.

runc passes descriptors 3 and up into the container (``--preserve-fds``) by number, and
``subprocess.Popen`` cannot put a descriptor at a chosen number without ``preexec_fn`` (a fork of
the whole controller instead of a vfork, unsafe beside threads). ``os.posix_spawn`` places each
one with a ``dup2`` action in the child. Every descriptor Python opens is close-on-exec, so runc
inherits only these four; runc itself closes everything past the preserved ones before the
container's process runs.
"""

from __future__ import annotations

import fcntl
import os
import select
import signal
import subprocess
import threading
from typing import BinaryIO

# Sources are first moved to this number or above, so that no dup2 onto 0..3 can overwrite a
# source a later action still reads (a controller started with a standard stream closed gets
# its pipes at 0..2).
_FIRST_FREE = 10


class RuncProcess:
    """The part of ``subprocess.Popen`` runc-direct uses: pid, stdout, stderr, poll, wait, kill."""

    def __init__(self, args: list[str], stdin: int, helper: int | None) -> None:
        self.args = args
        self.returncode: int | None = None
        self._lock = threading.Lock()
        out_read, out_write = os.pipe2(os.O_CLOEXEC)
        err_read, err_write = os.pipe2(os.O_CLOEXEC)
        wanted = [stdin, out_write, err_write] + ([helper] if helper is not None else [])
        moved: list[int] = []
        try:
            for fd in wanted:
                moved.append(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, _FIRST_FREE))
            self.pid = os.posix_spawn(
                args[0],
                args,
                os.environ,
                file_actions=[(os.POSIX_SPAWN_DUP2, fd, target) for target, fd in enumerate(moved)],
                setsid=True,
                # As Popen's restore_signals: Python ignores these, and an ignored signal stays
                # ignored across exec.
                setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
            )
        except BaseException:
            for fd in (out_read, err_read):
                os.close(fd)
            raise
        finally:
            for fd in (*moved, out_write, err_write):
                os.close(fd)
        try:
            self._pidfd = os.pidfd_open(self.pid)
        except OSError:
            os.kill(self.pid, signal.SIGKILL)  # not reaped yet: the pid is still runc's
            os.waitpid(self.pid, 0)
            for fd in (out_read, err_read):
                os.close(fd)
            raise
        self.stdout: BinaryIO = open(out_read, "rb", buffering=0)  # noqa: SIM115 - the relay closes it
        self.stderr: BinaryIO = open(err_read, "rb", buffering=0)  # noqa: SIM115 - the relay closes it

    def _reap(self, flags: int) -> None:
        with self._lock:
            if self.returncode is not None:
                return
            try:
                pid, status = os.waitpid(self.pid, flags)
            except ChildProcessError:
                pid, status = self.pid, 0  # reaped elsewhere: Popen reports 0 then too
            if pid == self.pid:
                self.returncode = os.waitstatus_to_exitcode(status)

    def poll(self) -> int | None:
        self._reap(os.WNOHANG)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            # The pidfd turns readable when runc exits (and stays so once it is reaped); waiting
            # on it holds no lock. It is closed only with this object, so its number is never
            # another file's while a thread waits.
            watcher = select.poll()
            watcher.register(self._pidfd, select.POLLIN)
            if not watcher.poll(None if timeout is None else max(0, int(timeout * 1000))):
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            self._reap(0)
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        with self._lock:
            if self.returncode is None:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)

    def __del__(self) -> None:
        pidfd = getattr(self, "_pidfd", -1)
        if pidfd >= 0:
            os.close(pidfd)
