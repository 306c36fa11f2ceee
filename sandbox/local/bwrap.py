"""The local backend's fence: a bubblewrap (``bwrap``) sandbox entered as an unprivileged uid.

Each call's process chain is: the forked child (still root, if Proctor runs as root) joins
the call's cgroups, sets rlimits, stages the host Python in a private mount namespace, drops
to a fresh unprivileged uid with no groups, then execs ``bwrap``. bwrap builds every
namespace (user, mount, pid, network, IPC, UTS, cgroup), a root of its own with only a
read-only view of /usr and the interpreter, a minimal /dev (no pseudo-terminals) and /proc,
and a sized tmpfs as the only writable place; the program never holds a capability or a host uid of 0.

Why the staging: the interpreter lives under /root (mode 700), which an unprivileged uid
cannot traverse, and bwrap 0.8 resolves even ``--ro-bind-fd`` sources by path. So the child,
while still root, mounts each host tree the sandbox reads (/usr, the interpreter prefixes, the
few /etc files, the synthetic passwd) onto an empty world-traversable directory in a mount
namespace private to this call; bwrap then binds from there onto the original path, and
nothing else of /root appears.

Each tree is staged as a read-only overlay of its own, not a bind: overlayfs gives every mount
its own inodes, so no file the program can reach is an inode another call (or the host) also
holds. A lock (flock, POSIX, OFD) or an inotify watch on /usr then reaches no other call: the
local backend leaked 549 bit/s through flock on host inodes before (issue 41; "What concurrent
samples share" in docs/sandbox.md). Unprivileged, nothing is staged and the binds are the
host's inodes: that difference is listed there too. /proc/locks, which lists every
open-file-description lock of the host in every pid namespace, is masked with /dev/null as the
engine masks its own list.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from proctor.sandbox.api import SandboxUnavailable
from proctor.sandbox.docker import seccomp
from proctor.sandbox.reaper import DEFAULT_SIGNALS_SOURCE, WAIT_SOURCE

INSTALL_HINT = "install bubblewrap (Debian: apt-get install bubblewrap) or use --backend docker"
# The uid/gid the program sees inside its user namespace: the docker image's sandbox user.
INSIDE_ID = 10001
# Each call gets its own host uid from this range: never 0, never a real account, and never
# shared by two concurrent calls, so RLIMIT_NPROC (counted per uid) cannot couple them.
HOST_UID_BASE = 0x70000000
HOST_UID_SPAN = 1 << 24
SHM_BYTES = 16 * 1024 * 1024
LAYOUT_PREFIX = "proctor-bwrap-"
# Top-level host paths the program may read. On merged-/usr systems the others are symlinks.
_SYSTEM_DIRS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
# A minimal /etc: the dynamic linker's cache, the time zone, Debian's alternatives symlinks.
_ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "alternatives", "nsswitch.conf")
_PASSWD = f"sandbox:x:{INSIDE_ID}:{INSIDE_ID}:sandbox:/tmp:/usr/sbin/nologin\n"
_GROUP = f"sandbox:x:{INSIDE_ID}:\n"

_CLONE_NEWNS = 0x00020000
_MS_RDONLY = 0x1
_MS_NOSUID = 0x2
_MS_NODEV = 0x4
_MS_REC = 0x4000
_MS_PRIVATE = 0x40000
_PR_SET_PDEATHSIG = 1
_PR_SET_NO_NEW_PRIVS = 38


def find_bwrap() -> str:
    """Absolute path of ``bwrap``; :class:`SandboxUnavailable` with the fix when it is missing."""
    found = shutil.which("bwrap")
    if found is None:
        raise SandboxUnavailable(f"no bwrap: the local backend needs bubblewrap; {INSTALL_HINT}")
    return found


def interpreter_prefixes(python: str) -> list[str]:
    """Directories the interpreter needs that lie outside /usr: its prefix (and a venv's)."""
    prefixes: list[str] = []
    for candidate in (sys.base_prefix, sys.prefix, str(Path(python).resolve().parent.parent)):
        real = os.path.realpath(candidate)
        if real == "/usr" or real.startswith("/usr/") or real == "/":
            continue
        if not any(real == p or real.startswith(p + "/") for p in prefixes):
            prefixes.append(real)
    return prefixes


@dataclass
class Layout:
    """Per-sandbox files on the host: the synthetic /etc/passwd and the staging mountpoints.

    The directory is root-owned and world-readable (0755) and holds nothing secret.
    """

    root: Path
    prefixes: list[str]

    def trees(self) -> list[str]:
        """Every host directory the sandbox reads from, each staged as an overlay of its own."""
        return list(self._trees)

    @functools.cached_property
    def _trees(self) -> tuple[str, ...]:
        # Looked up once, in the parent: the forked child only mounts.
        system = [
            f"/{name}"
            for name in _SYSTEM_DIRS
            if not Path(f"/{name}").is_symlink() and Path(f"/{name}").is_dir()
        ]
        return ("/usr", *system, "/etc", str(self.root / "etc"), *self.prefixes)

    def tree_stage(self, index: int) -> str:
        return str(self.root / f"tree-{index}")

    @property
    def empty(self) -> str:
        """The second, empty lower layer a read-only overlay needs."""
        return str(self.root / "empty")

    def source(self, host_path: str, staged: bool) -> str:
        """Where bwrap binds ``host_path`` from: inside its tree's overlay when staged."""
        if not staged:
            return host_path
        trees = self._trees
        holding = [i for i, tree in enumerate(trees) if host_path == tree or host_path.startswith(tree + "/")]
        if not holding:
            raise ValueError(f"{host_path} is in no staged tree")
        best = max(holding, key=lambda index: len(trees[index]))  # the innermost tree holding it
        return self.tree_stage(best) + host_path[len(trees[best]) :]

    @classmethod
    def create(cls, prefixes: list[str]) -> Layout:
        # Named after the owner's pid, so `proctor sandbox cleanup` can tell stale ones.
        root = Path(tempfile.mkdtemp(prefix=f"{LAYOUT_PREFIX}{os.getpid()}-"))
        root.chmod(0o755)
        etc = root / "etc"
        etc.mkdir(mode=0o755)
        (etc / "passwd").write_text(_PASSWD)
        (etc / "group").write_text(_GROUP)
        for path in etc.iterdir():
            path.chmod(0o644)
        layout = cls(root=root, prefixes=prefixes)
        unsafe = [tree for tree in layout.trees() if any(char in tree for char in ":,\\\n")]
        if unsafe:
            layout.remove()
            raise SandboxUnavailable(f"local backend: a path overlayfs cannot take as a layer: {unsafe[0]!r}")
        for index in range(len(layout.trees())):
            Path(layout.tree_stage(index)).mkdir(mode=0o755)
        Path(layout.empty).mkdir(mode=0o755)
        return layout

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def remove_stale_layouts(owner_alive: Callable[[int], bool]) -> int:
    """Remove layout directories whose owner process is gone (it was killed before closing)."""
    removed = 0
    for path in Path(tempfile.gettempdir()).glob(f"{LAYOUT_PREFIX}*"):
        try:
            owner = int(path.name[len(LAYOUT_PREFIX) :].split("-")[0])
        except ValueError:
            continue
        if not owner_alive(owner):
            shutil.rmtree(path, ignore_errors=True)
            removed += 1
    return removed


def seccomp_fd() -> int:
    """A fresh descriptor holding the program's seccomp filter, for ``--seccomp`` (one per call:
    bwrap reads it to the end). Inherited by bwrap only (``pass_fds``); the caller closes it."""
    try:
        data = seccomp.program_filter()
    except seccomp.UnsupportedMachine as exc:
        raise SandboxUnavailable(f"{exc}; use --backend docker") from None
    fd = os.memfd_create("proctor-seccomp", os.MFD_CLOEXEC)
    try:
        os.write(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


# The sandbox's PID 1, in place of bwrap's own reaper (``--as-pid-1``). bwrap's reaper runs as
# the program's uid and stays dumpable, so the program could PTRACE_ATTACH it, SIGSTOP it and
# read its memory and stdin (the audit's priv.ptrace, enforce.stop, enforce.read); and it read
# a traced child's stop as the program's end. This init makes itself non-dumpable before the
# program exists, which puts its /proc files, its memory and ptrace out of reach of a process
# without CAP_SYS_PTRACE in the namespace (the program has none), and being the namespace's
# init, the kernel drops every signal sent to it from inside for which it has no handler: it
# keeps one (Python's SIGINT handler is reset): SIGALRM, its backstop. It forks the program with
# every signal at its default and none blocked (reaper.DEFAULT_SIGNALS_SOURCE), waits with the
# same code as the docker launcher (sandbox/reaper.py: only the program's own exit or signal,
# 128 + N, ever comes back), then exits with that: its end takes every process left in the
# namespace with it.
#
# bwrap's own --die-with-parent was seen not to reach this init (a SIGKILLed controller's sleeping
# program ran on for good; the kernel clears a parent-death signal when the credentials change,
# and bwrap changes them after setting it). So the init sets its own (SIGKILL, which the kernel
# delivers to a namespace's init when it comes from an ancestor namespace): bwrap's end, at the
# deadline or with its controller, is the init's.
#
# The backstop (its first argument, seconds: the deadline plus BACKSTOP_GRACE_S) ends the program
# should bwrap have died before the init could set that signal, or should nothing have ended the
# call at its deadline: a program that sleeps or blocks uses no CPU time for RLIMIT_CPU to stop.
# The program may send SIGALRM to the init itself (same uid); that only ends the program sooner,
# as if it had been killed. The init unblocks every signal first: a mask inherited from the
# controller would hold that alarm back.
INIT = (
    """\
import ctypes, errno, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(4, 0, 0, 0, 0) != 0:
    os.write(2, b'sandbox: the init cannot make itself non-dumpable\\n')
    os._exit(1)
signal.signal(signal.SIGINT, signal.SIG_DFL)
if libc.prctl(1, 9, 0, 0, 0) != 0:
    os.write(2, b'sandbox: the init cannot set its parent-death signal\\n')
    os._exit(1)
signal.pthread_sigmask(signal.SIG_SETMASK, ())
signal.signal(signal.SIGALRM, lambda *_: os._exit(137))
signal.alarm(int(sys.argv[1]))
"""
    + WAIT_SOURCE
    + DEFAULT_SIGNALS_SOURCE
    + """\
argv = sys.argv[2:]
pid = os.fork()
if pid == 0:
    try:
        default_signals()
        os.execvp(argv[0], argv)
    except BaseException as exc:
        try:
            why = getattr(exc, 'strerror', None) or exc
            os.write(2, ('sandbox: cannot run %r: %s\\n' % (argv[0], why)).encode())
        finally:
            os._exit(127)
os._exit(wait(pid))
"""
)


def bwrap_argv(
    bwrap: str,
    layout: Layout,
    tmpfs_bytes: int,
    program: Sequence[str],
    *,
    staged: bool,
    seccomp_fd: int,
    python: str,
    backstop_s: int,
) -> list[str]:
    """The full command line: bwrap's options, then :data:`INIT` (run by ``python``) with its
    backstop in seconds, then the program."""
    if backstop_s < 1:
        raise ValueError(f"the init's backstop must be at least one second, not {backstop_s}")
    argv = [
        bwrap,
        "--unshare-all",  # user, mount, pid, net, ipc, uts, cgroup (if the kernel has it)
        # No bwrap reaper: INIT is the namespace's PID 1 (see there).
        "--as-pid-1",
        "--unshare-user",
        "--disable-userns",  # no nested user namespaces: no capabilities to regain inside
        "--die-with-parent",
        "--new-session",  # no controlling terminal: TIOCSTI cannot inject keystrokes
        "--cap-drop",
        "ALL",
        "--uid",
        str(INSIDE_ID),
        "--gid",
        str(INSIDE_ID),
        "--hostname",
        "sandbox",
        # The program's system-call filter (sandbox/docker/seccomp.py): no io_uring, no AF_VSOCK or
        # other address families a network namespace does not fence, no 32-bit entry point.
        "--seccomp",
        str(seccomp_fd),
        "--ro-bind",
        layout.source("/usr", staged),
        "/usr",
    ]
    for name in _SYSTEM_DIRS:
        host = Path("/") / name
        if host.is_symlink():
            argv += ["--symlink", os.readlink(host), f"/{name}"]
        elif host.is_dir():
            argv += ["--ro-bind", layout.source(str(host), staged), f"/{name}"]
    for name in _ETC_FILES:
        # Through its link's target (/etc/localtime is one): a link in a stage would resolve
        # against the host's root, to the host's inode.
        argv += ["--ro-bind-try", layout.source(os.path.realpath(f"/etc/{name}"), staged), f"/etc/{name}"]
    for name in ("passwd", "group"):
        argv += ["--ro-bind", layout.source(str(layout.root / "etc" / name), staged), f"/etc/{name}"]
    for prefix in layout.prefixes:
        argv += ["--ro-bind", layout.source(prefix, staged), prefix]
    argv += [
        "--dev",
        "/dev",
        # An empty tmpfs over the devpts bwrap mounts there: no pseudo-terminals. Their count is
        # host-wide (kernel.pty.max less kernel.pty.reserve is shared by every sandbox and
        # container), so one call holding them all would leave every other call without one.
        "--size",
        "4096",
        "--perms",
        "0755",
        "--tmpfs",
        "/dev/pts",
        "--size",
        str(SHM_BYTES),
        "--tmpfs",
        "/dev/shm",
        "--proc",
        "/proc",
        # Masked as the engine masks it (sandbox/docker/containers.py PROCTOR_MASKED_PATHS): the host's
        # open-file-description locks, byte ranges verbatim, are visible in every pid namespace.
        "--dev-bind",
        "/dev/null",
        "/proc/locks",
        # And the host's pressure stall figures (where the kernel has them): an empty read-only
        # directory here as there.
        *(["--perms", "0555", "--tmpfs", "/proc/pressure"] if os.path.isdir("/proc/pressure") else []),
        "--size",
        str(tmpfs_bytes),
        "--perms",
        "1777",
        "--tmpfs",
        "/tmp",
        # Last: the root bwrap built and its /dev become read-only (not recursive, so the
        # tmpfs mounts on /tmp and /dev/shm stay writable).
        "--remount-ro",
        "/dev/pts",
        "--remount-ro",
        "/dev",
        "--remount-ro",
        "/",
        "--chdir",
        "/tmp",
        "--",
        python,
        "-I",
        "-S",
        "-c",
        INIT,
        str(backstop_s),
        *program,
    ]
    return argv


def pick_host_uid() -> int:
    return HOST_UID_BASE + secrets.randbelow(HOST_UID_SPAN)


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def stage_prefixes(layout: Layout) -> None:
    """In the forked child, as root: a private mount namespace with each host tree on its stage,
    as a read-only overlay of its own (its inodes are this call's alone)."""
    libc = _libc()
    _check(libc.unshare(_CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _check(libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "make / private")
    flags = _MS_RDONLY | _MS_NOSUID | _MS_NODEV
    for index, tree in enumerate(layout.trees()):
        options = f"lowerdir={tree}:{layout.empty}".encode()
        target = layout.tree_stage(index).encode()
        _check(libc.mount(b"overlay", target, b"overlay", flags, options), f"overlay of {tree}")


def drop_privileges(uid: int) -> None:
    """No groups, one unprivileged uid/gid, no-new-privileges; then die with the parent.

    The parent-death signal is set last: the kernel clears it whenever credentials change.
    """
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    libc = _libc()
    _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    _check(libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0), "parent death signal")


def make_child_setup(
    layout: Layout, host_uid: int | None, before_drop: Callable[[], None]
) -> Callable[[], None]:
    """The preexec function: cgroups and rlimits (``before_drop``), staging, privilege drop.

    ``host_uid`` is None when Proctor already runs unprivileged: nothing to stage or drop.
    """
    _libc()  # loaded in the parent: the child should not have to dlopen
    layout.trees()  # and the trees looked up here: the child only mounts

    def setup() -> None:
        before_drop()
        if host_uid is None:
            libc = _libc()
            _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
            _check(libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0), "parent death signal")
            return
        stage_prefixes(layout)
        drop_privileges(host_uid)

    return setup


def probe(bwrap: str, layout: Layout, python: str) -> str | None:
    """Run the interpreter once inside the full fence; None when it works, else why not."""
    root = os.geteuid() == 0
    setup = make_child_setup(layout, pick_host_uid() if root else None, lambda: None)
    try:
        filter_fd = seccomp_fd()
    except SandboxUnavailable as exc:
        return str(exc)
    argv = bwrap_argv(
        bwrap,
        layout,
        1024 * 1024,
        [python, "-I", "-c", "print('ok')"],
        staged=root,
        seccomp_fd=filter_fd,
        python=python,
        backstop_s=60,
    )
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=30,
            cwd="/",
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
            preexec_fn=setup,
            pass_fds=(filter_fd,),
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    finally:
        os.close(filter_fd)
    if done.returncode == 0 and done.stdout == "ok\n":
        return None
    lines = (done.stderr or done.stdout).strip().splitlines()
    return lines[-1] if lines else f"exit status {done.returncode}"
