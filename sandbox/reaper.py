"""How a supervisor inside the sandbox waits for the program: source text shared by the docker
launcher (sandbox/docker/launcher.py) and the local backend's init (sandbox/local/bwrap.py), and
how each starts the program's signals (:data:`DEFAULT_SIGNALS_SOURCE`).

Both supervisors are Python run with ``-c``, so this is source, not an import: the init embeds
:data:`WAIT_SOURCE` verbatim, and the launcher, a module of its own whose text is what runs,
holds the same text as code (tests/sandbox/test_launcher_module.py keeps the two equal). It
defines ``wait(pid)``, ``reap()`` and ``untrace(tid, status)`` and needs ``ctypes``,
``errno``, ``os`` and a ``libc`` (``ctypes.CDLL(None, use_errno=True)``).

The invariant: ``wait(pid)`` returns only the program's own end (its exit status, or 128 + the
signal that killed it), whatever any process in the sandbox does, and never raises.

Ptrace policy (docs/sandbox.md, "Tracing"). A program may trace its own descendants: that is a
debugger, and nothing of the supervisor is involved. It may never make the supervisor a tracer.
``ptrace(PTRACE_TRACEME)`` does exactly that (the tracer is the caller's parent: the supervisor
for the program itself, or for a sibling made with ``clone(CLONE_PARENT)``), and a traced task's
stops are then reported to the supervisor's ``waitpid``, which before this treated any status
but "exited" or "killed" as impossible and crashed. Now every status a child can report is
handled in a loop until the program's terminal one:

* exited or killed, the program: its result; another child of ours (a CLONE_PARENT sibling, or
  a traced thread's end): reaped and ignored;
* stopped (only traced tasks report stops here: no WUNTRACED): a stop we see only because we
  are the tracer. We detach at once (PTRACE_DETACH), handing back the signal the task was
  stopping for, so it runs on exactly as if it had never asked to be traced: a handler it set
  runs, a fatal signal kills it, SIGSTOP stops it as an untraced process (the deadline then
  ends it). A group-stop (PTRACE_GETSIGINFO fails) is detached without a signal and stays
  stopped, as the kernel does for an untraced task; event and syscall stops cannot occur (we
  set no options and never resume with PTRACE_SYSCALL) and would be detached without one. The
  one signal a traced task gets only for being traced is the SIGTRAP the kernel sends at
  execve; it asked for that, and it is delivered like any other.
* continued: never asked for (no WCONTINUED); ignored if it came.

If the detach itself fails with anything but "no such task" (a filter refusing ptrace to the
supervisor), the task is killed rather than left stopped forever: the program chose to stop in
a way nobody can resume, and it ends as if it had been killed at the deadline, only sooner.
"""

from __future__ import annotations

# Both supervisors end everything this long after the call's deadline on their own, so a program
# whose controller died (SIGKILL, a crashed host process) still ends: the host normally ends the
# call at the deadline itself, and this is only the backstop.
BACKSTOP_GRACE_S = 5.0

# The program starts with every signal at its default action and none blocked, whatever its
# supervisor inherited. An ignored signal and the signal mask survive fork and execve, so a
# controller started under nohup, from a background job of a non-interactive shell (SIGINT and
# SIGQUIT ignored) or by a service manager would otherwise hand those to the program: the same
# program would then survive a SIGHUP or SIGTERM on one host and die of it on another.
# Each supervisor's child calls ``default_signals()`` just before it execs the program. It needs
# a ``signal`` module (``signal`` or ``_signal``).
DEFAULT_SIGNALS_SOURCE = """\
def default_signals() -> None:
    for sig in signal.valid_signals():
        if sig != signal.SIGKILL and sig != signal.SIGSTOP:
            try:
                signal.signal(sig, signal.SIG_DFL)
            except (OSError, ValueError):
                pass
    signal.pthread_sigmask(signal.SIG_SETMASK, ())
"""

WAIT_SOURCE = """\
PTRACE_DETACH, PTRACE_GETSIGINFO, WALL = 17, 0x4202, 0x40000000
libc.ptrace.restype = ctypes.c_long


def untrace(tid: int, status: int) -> None:
    sig = os.WSTOPSIG(status)
    if status >> 16 or sig == 0x85:
        sig = 0
    elif libc.ptrace(PTRACE_GETSIGINFO, tid, None, ctypes.create_string_buffer(128)) != 0:
        sig = 0
    if libc.ptrace(PTRACE_DETACH, tid, None, ctypes.c_void_p(sig)) != 0:
        if ctypes.get_errno() != errno.ESRCH:
            try:
                os.kill(tid, 9)
            except OSError:
                pass


def reap() -> None:
    while True:
        try:
            got, status = os.waitpid(-1, os.WNOHANG | WALL)
        except ChildProcessError:
            return
        if got == 0:
            return
        if os.WIFSTOPPED(status):
            untrace(got, status)


def wait(pid: int) -> int:
    while True:
        try:
            got, status = os.waitpid(-1, WALL)
        except ChildProcessError:
            return 255
        if os.WIFSTOPPED(status):
            untrace(got, status)
        elif got == pid and os.WIFEXITED(status):
            return os.WEXITSTATUS(status)
        elif got == pid and os.WIFSIGNALED(status):
            return 128 + os.WTERMSIG(status)
"""
