"""The launcher: the root supervisor in every docker sandbox container (``python3 -I -S -c SOURCE CONFIG``).

This file is not imported inside the container (no ``proctor`` package is there): its text is
the ``-c`` argument, read by sandbox/docker/containers.py (``LAUNCHER``) exactly as it is here,
and under runc-direct compiled once per template by the image's own interpreter from that same
text (sandbox/docker/oci_direct.py). It may import only the standard library, and only the C
cores where a Python wrapper would cost start-up time in every container. On the host it is
imported only for its constants and pure functions (tests/sandbox/test_launcher_module.py).

It waits on stdin for a length-prefixed JSON request and forks the program it names, which
runs as a brand-new process. This lets the warm
pool start containers ahead of demand and still give each call a process and filesystem nobody
used before; a per-call container uses the same path.

The container runs as root, with only the capabilities the launcher needs (LAUNCHER_CAPS in
containers.py); the program runs as the image's unprivileged user. The launcher enforces the
call's limits and reports its exit, so the program must not be able to signal, stop, trace or
read it: a process of another uid, made non-dumpable, is out of an unprivileged program's reach
(kill(2), ptrace(2) and /proc/<pid>/{mem,environ,fd} all check exactly that), and docker-init
(PID 1) is root as well.

The launcher reads exactly the header and request with os.read (never past them); the request
says how many bytes of stdin follow, and a feeder thread copies exactly those into a fresh pipe
that is the program's stdin, so the program sees end-of-file after its own input and the next
request starts where this one ended. The launcher exits quietly when stdin closes (pool
teardown, or a controller that died). It forks the program, which drops to the sandbox user
with no supplementary groups and an empty capability bounding set before exec (a failure there
ends the child, so nothing ever runs as root), waits for it (killing everything itself a little
after the deadline, should the host be gone), kills every process the program left behind until
/proc shows none but docker-init and itself, then writes an exit report as the last bytes of
BOTH streams. Each stream is ordered, so the report proves all of the program's output has
arrived: the host can answer without waiting for the engine to notice the container stopping
(about 50 ms here). The report carries a per-call nonce that exists only in the launcher's
memory and on the host.

Recycling (docs/sandbox.md, "Recycled containers"): when the request allows it and the call
ended cleanly (every process gone, no OOM kill), the report says the container can be reset,
and the launcher writes nothing more until the host has read the whole call and sends one byte.
When every writable tree holds exactly the entries it held after the last reset (same inode,
change time, mode, owner, link target, xattrs; and no regular file at all, whose content could
change within one timestamp tick) and the IPC/socket/process checks below hold, nothing was
written and the container is ready at once. Otherwise a child demoted to the sandbox user
empties every writable place (/tmp, /work, /dev/shm, /dev/mqueue), restores the two tmpfs
roots' mode, drops their extended attributes and removes every System V IPC object; the
entrypoint runs again (a fresh numba cache); and the root launcher itself checks the result:
no process, no IPC object, no socket, empty directories, the same listing of /tmp as when the
container was new. Only then is it ready again; any deviation ends the launcher instead, and
the container is removed.

Before announcing itself ready the first time, the launcher runs the image's entrypoint once as
the sandbox user (``ENTRYPOINT true``): the pinned image's sandbox-init prepares the numba cache
on the tmpfs, which must belong to the program, not to root. Where the entrypoint's tree was
recorded once per template (runc-direct, sandbox/docker/prepare_once.py), a child demoted the
same way rebuilds that tree instead, at the start and after a reset's wipe.
"""

from __future__ import annotations

# The C cores of json, signal and threading: their Python wrappers import re, enum, functools
# and collections, most of this launcher's start-up in every container. Nothing from typing
# either (it imports re and collections): annotations are never evaluated here.
import _signal as signal
import _thread
import errno
import fcntl
import os
import resource
import select
import stat
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    import ctypes
    from typing import Any
else:
    try:
        # The same for ctypes: its package (with struct) defines a hundred types at import, about
        # a quarter of this launcher's start-up. The few used here come from its C core, built as
        # the package builds them; an interpreter without that core gets the package.
        import _ctypes

        class ctypes:
            from _ctypes import Structure, byref, get_errno

            class c_int(_ctypes._SimpleCData):
                _type_ = "i"

            class c_long(_ctypes._SimpleCData):
                _type_ = "l"

            class c_ushort(_ctypes._SimpleCData):
                _type_ = "H"

            class c_char(_ctypes._SimpleCData):
                _type_ = "c"

            class c_char_p(_ctypes._SimpleCData):
                _type_ = "z"

            class c_void_p(_ctypes._SimpleCData):
                _type_ = "P"

            @staticmethod
            def create_string_buffer(size):
                return (ctypes.c_char * size)()

            class CDLL:
                def __init__(self, name, use_errno):
                    flags = _ctypes.FUNCFLAG_CDECL | (_ctypes.FUNCFLAG_USE_ERRNO if use_errno else 0)

                    class Function(_ctypes.CFuncPtr):
                        _flags_ = flags
                        _restype_ = ctypes.c_int

                    self._function = Function
                    self._handle = _ctypes.dlopen(name, 0)

                def __getattr__(self, name):
                    function = self._function((name, self))
                    setattr(self, name, function)
                    return function

    except (ImportError, AttributeError):
        import ctypes
# The end of the launcher's imports (tests/sandbox/test_launcher_ctypes.py runs what comes before).

# The request's header: its length in this many ASCII digits (containers.py writes it).
HEADER_DIGITS = 10
# Written to stdout each time the launcher waits for a request.
READY = b"\0proctor-ready\0"
# The prefix of a probe's answer (sandbox/docker/prepare_once.py reads it).
PREPARED = b"\0proctor-prepared:"
WRITABLE = ("/tmp", "/work", "/dev/shm", "/dev/mqueue")
OWNED = ("/tmp", "/work")
F_SETPIPE_SZ, F_GETPIPE_SZ = 1031, 1032


def _json_scanner() -> Any:
    # The C scanner alone: json's Python package imports re.
    try:
        from _json import make_scanner
    except ImportError:
        return None

    class JsonContext:
        strict, object_hook, object_pairs_hook = True, None, None
        parse_float, parse_int, parse_constant = float, int, float

    return make_scanner(JsonContext())  # type: ignore[arg-type]


scan_json = _json_scanner()


def json_loads(data: bytes | str) -> Any:
    """One JSON value that is the whole of ``data``; ValueError otherwise."""
    if scan_json is None:
        import json

        return json.loads(data)
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    value, end = scan_json(text, 0)
    if end != len(text):
        raise ValueError("trailing data after the JSON value")
    return value


def exit_report(
    nonce: str, code: int, oom: int, reusable: int, launcher_us: int, prepare_us: int, program_us: int
) -> bytes:
    """The last bytes of both streams after a call: containers.py's ``_REPORT`` reads them."""
    return (
        f"\0proctor-exit:{nonce}:{code}:{oom}:{reusable}:{launcher_us}:{prepare_us}:{program_us}\0"
    ).encode()


# Set by main() from the configuration (sys.argv[1]) before anything else runs.
config: dict[str, Any] = {}
SOURCE_FD = -1
uid = gid = -1
STREAM_FLAGS: dict[int, int] = {}
# None where the pipes' sizes cannot be read: a reset then cannot restore them and retires.
PIPE_SIZES: Any = None
SECCOMP = b""
# What the image's entrypoint leaves in the writable places, recorded once per template
# (sandbox/docker/prepare_once.py): [path, kind, mode, data], paths and data hex, parents first.
REPLAY: list[list[Any]] | None = None
# The container's state when it was new (state()), what a reset must come back to.
fresh: Any = None
libc = ctypes.CDLL(None, use_errno=True)


def pipe_sizes() -> dict[int, int] | None:
    try:
        return {fd: fcntl.fcntl(fd, F_GETPIPE_SZ) for fd in (1, 2)}
    except OSError:
        return None


class Fprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_char_p))


def confine() -> None:
    if libc.prctl(38, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "cannot set no_new_privs")
    program = Fprog(len(SECCOMP) // 8, SECCOMP)
    if libc.prctl(22, 2, ctypes.byref(program), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "cannot install the seccomp filter")


def demote() -> None:
    if config["nproc"]:
        resource.setrlimit(resource.RLIMIT_NPROC, (config["nproc"], config["nproc"]))
    for cap in range(64):
        if libc.prctl(24, cap, 0, 0, 0) != 0:
            if ctypes.get_errno() == 22:
                break
            raise OSError(ctypes.get_errno(), f"cannot drop capability {cap}")
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getresuid() != (uid, uid, uid) or os.getgroups():
        raise OSError(1, "still privileged")
    default_signals()
    confine()


def spawn(
    argv: list[str] | None,
    stdin: int | None = None,
    before_exec: Any = None,
    source: int | None = None,
) -> int:
    # argv None: the child recreates the entrypoint's recorded tree (rebuild) and runs nothing else.
    pid = os.fork()
    if pid == 0:
        try:
            if stdin is not None:
                os.dup2(stdin, 0)
            if source is not None:
                if source == SOURCE_FD:
                    os.set_inheritable(source, True)
                else:
                    os.dup2(source, SOURCE_FD)
            demote()
            if before_exec is not None:
                before_exec()
            if argv is None:
                rebuild()
                os._exit(0)
            os.execvpe(argv[0], argv, os.environ)
        except BaseException as exc:
            try:
                why = getattr(exc, "strerror", None) or exc
                what = argv[0] if argv is not None else "the recorded entrypoint tree"
                os.write(2, f"sandbox: cannot run {what!r}: {why}\n".encode())
            finally:
                os._exit(127)
    return pid


def rebuild() -> None:
    directories = []
    for path_hex, kind, mode, data in REPLAY or ():
        path = bytes.fromhex(path_hex)
        if kind == "d":
            os.mkdir(path, 0o700)
            directories.append((path, mode))
        elif kind == "l":
            os.symlink(bytes.fromhex(data), path)
        elif kind == "f":
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            view = memoryview(bytes.fromhex(data))
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, mode)
            os.close(fd)
        else:
            raise OSError(22, f"unknown entry kind {kind!r}")
    # Deepest first, after their entries: a directory the entrypoint left read-only is still
    # filled before it becomes so.
    for path, mode in reversed(directories):
        os.chmod(path, mode)


# How the program is waited for, and its signals set back: sandbox/reaper.py's WAIT_SOURCE and
# DEFAULT_SIGNALS_SOURCE, the same text the local backend's init runs (a test keeps them equal).
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


def default_signals() -> None:
    for sig in signal.valid_signals():
        if sig != signal.SIGKILL and sig != signal.SIGSTOP:
            try:
                signal.signal(sig, signal.SIG_DFL)
            except (OSError, ValueError):
                pass
    signal.pthread_sigmask(signal.SIG_SETMASK, ())


# End of the shared text.


def kill_all(*_: object) -> None:
    try:
        os.kill(-1, 9)
    except OSError:
        pass


def backstop(*_: object) -> None:
    # No host ended the call at its deadline (it is gone, or stalled): kill everything and end
    # here rather than sweep. Our end ends docker-init and so the container, and the kernel (or
    # gVisor's sentry) takes every process of its pid namespace with it, however fast a fork
    # bomb refills it; sweeping one under gVisor's ptrace platform on a loaded machine took
    # longer than the deadline's grace. Nobody is left to read a report.
    kill_all()
    os._exit(137)


def others() -> list[str]:
    me = os.getpid()
    return [name for name in os.listdir("/proc") if name.isdigit() and int(name) not in (1, me)]


def sweep() -> bool:
    for _ in range(300):
        kill_all()
        reap()
        if not others():
            return True
        time.sleep(0.01)
    return False


def oom_kills() -> int:
    count = 0
    for path in ("/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events"):
        try:
            with open(path) as fh:
                for line in fh:
                    name, _, value = line.partition(" ")
                    if name == "oom_kill":
                        count += int(value)
        except (OSError, ValueError):
            pass
    return count


def empty(path: str) -> None:
    for entry in os.scandir(path):
        if entry.is_dir(follow_symlinks=False):
            os.chmod(entry.path, 0o700)
            empty(entry.path)
            os.rmdir(entry.path)
        else:
            os.unlink(entry.path)


def ipc_ids(kind: str) -> list[int]:
    with open("/proc/sysvipc/" + kind) as fh:
        return [int(line.split()[1]) for line in fh.read().splitlines()[1:] if line.strip()]


def wipe() -> None:
    for path in OWNED:
        os.chmod(path, 0o700)
    for path in WRITABLE:
        empty(path)
    for path in OWNED:
        for name in os.listxattr(path, follow_symlinks=False):
            os.removexattr(path, name, follow_symlinks=False)
        os.chmod(path, fresh[path][1] & 0o7777)
        os.utime(path)
    for kind, control in (("shm", libc.shmctl), ("sem", libc.semctl), ("msg", libc.msgctl)):
        for ident in ipc_ids(kind):
            if control(ident, 0, 0, 0) != 0:
                raise OSError(ctypes.get_errno(), f"cannot remove {kind} {ident}")


def restore_times() -> bool:
    # A program sets a writable root's modification time: directly on the roots it owns
    # (utime), by the moment it last created or removed an entry on the others (/dev/shm,
    # /dev/mqueue); the wipe and the entrypoint then move it again. Each is set back to what it
    # was when the container was new, after the entrypoint: the sandbox user's roots by a child
    # demoted to it (only an owner may set a time; the launcher has no CAP_FOWNER), root's by
    # the launcher. Access times need nothing: relatime moves them only on a first read after a
    # change, and the reset's own listing (state()) makes that read.
    pid = os.fork()
    if pid == 0:
        try:
            demote()
            for path in OWNED:
                os.utime(path, ns=(os.lstat(path).st_atime_ns, fresh[path + " mtime"]))
        except BaseException:
            os._exit(1)
        os._exit(0)
    if wait(pid) != 0:
        return False
    for path in WRITABLE:
        if path not in OWNED:
            os.utime(path, ns=(os.lstat(path).st_atime_ns, fresh[path + " mtime"]))
    return True


def prepare(before_exec: Any = None) -> bool:
    if REPLAY is not None:
        argv = None
    else:
        argv = config["prepare"] + ["true"] if config["prepare"] else ["true"]
    done = wait(spawn(argv, before_exec=before_exec))
    return sweep() and done == 0


def cpu_us(who: int) -> int:
    used = resource.getrusage(who)
    return int((used.ru_utime + used.ru_stime) * 1e6)


def state() -> dict[str, Any]:
    found: dict[str, Any] = {}
    for path in WRITABLE:
        info = os.lstat(path)
        found[path] = (sorted(os.listdir(path)), info.st_mode, info.st_uid, info.st_gid)
        found[path + " xattrs"] = sorted(os.listxattr(path, follow_symlinks=False))
        found[path + " mtime"] = info.st_mtime_ns
    for kind in ("shm", "sem", "msg"):
        found[kind] = ipc_ids(kind)
    for kind in ("tcp", "tcp6", "udp", "udp6", "raw", "raw6", "unix", "packet"):
        try:
            with open("/proc/net/" + kind) as fh:
                found[kind] = fh.read().splitlines()[1:]
        except OSError:
            found[kind] = None
    found["processes"] = others()
    return found


def tree() -> list[tuple[Any, ...]] | None:
    found: list[tuple[Any, ...]] = []
    stack = list(WRITABLE)
    try:
        while stack:
            path = stack.pop()
            info = os.lstat(path)
            if stat.S_ISREG(info.st_mode):
                return None
            link = os.readlink(path) if stat.S_ISLNK(info.st_mode) else None
            names = None if link is not None else sorted(os.listxattr(path, follow_symlinks=False))
            found.append(
                (
                    path,
                    info.st_mode,
                    info.st_uid,
                    info.st_gid,
                    info.st_size,
                    info.st_ino,
                    info.st_ctime_ns,
                    link,
                    names,
                )
            )
            if stat.S_ISDIR(info.st_mode):
                stack.extend(os.path.join(path, name) for name in sorted(os.listdir(path)))
    except OSError:
        return None
    return found


def restore_streams() -> None:
    for fd, flags in STREAM_FLAGS.items():
        fcntl.fcntl(fd, fcntl.F_SETFL, flags)


def say(fd: int, data: bytes) -> None:
    # The program shares the open file description of our stdout and stderr (one pipe each),
    # and with it the status flags: it may leave them O_NONBLOCK (a full pipe would then fail
    # our report), O_APPEND or O_DIRECT (packet mode). They are set back before every write; a
    # write that still meets a full pipe (a straggler set the flag again) waits for room.
    view = memoryview(data)
    while view:
        restore_streams()
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            select.select([], [fd], [], 0.05)


def take(n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = os.read(0, min(n - len(data), 1 << 20))
        if not chunk:
            os._exit(0)
        data += chunk
    return bytes(data)


def feed(count: int, pipe: int, fed: Any) -> None:
    broken = False
    while count > 0:
        chunk = os.read(0, min(count, 65536))
        if not chunk:
            os._exit(0)
        count -= len(chunk)
        while chunk and not broken:
            try:
                chunk = chunk[os.write(pipe, chunk) :]
            except OSError:
                broken = True
    os.close(pipe)
    fed.release()


def recorded(path: bytes, found: list[str]) -> list[str]:
    # The tree under one writable root as the entrypoint left it, or ValueError naming what a
    # rebuild could not make the same: only the sandbox user's directories, regular files
    # (one link, no holes) and symbolic links, without extended attributes, none in /dev/mqueue.
    for name in sorted(os.listdir(path)):
        full = os.path.join(path, name)
        info = os.lstat(full)
        what = full.decode("utf-8", "replace")
        if path.startswith(b"/dev/mqueue"):
            raise ValueError(f"a message queue {what}")
        if (info.st_uid, info.st_gid) != (uid, gid):
            raise ValueError(f"{what} is not owned by the sandbox user")
        if os.listxattr(full, follow_symlinks=False):
            raise ValueError(f"{what} has extended attributes")
        mode = stat.S_IMODE(info.st_mode)
        if stat.S_ISDIR(info.st_mode):
            found.append(f"{full.hex()} d {mode} -")
            recorded(full, found)
        elif stat.S_ISLNK(info.st_mode):
            found.append(f"{full.hex()} l 0 {os.readlink(full).hex()}")
        elif stat.S_ISREG(info.st_mode) and info.st_nlink == 1 and info.st_blocks * 512 >= info.st_size:
            with open(full, "rb") as fh:
                found.append(f"{full.hex()} f {mode} {fh.read().hex() or '-'}")
        else:
            raise ValueError(f"{what} is not a directory, a regular file or a symbolic link")
    return found


def probe() -> None:
    # Run the entrypoint once and report what it left, for sandbox/docker/prepare_once.py; any
    # effect beyond the writable trees (a changed root, IPC object, socket, process) refuses a replay.
    before = state()
    try:
        if not prepare():
            raise ValueError("the entrypoint failed")
        after = state()
        for key in before:
            if key in WRITABLE:
                if after[key][1:] != before[key][1:]:
                    raise ValueError(f"it changed {key} itself")
            elif key.endswith(" mtime"):
                continue  # its entries' creation moves it; a reset sets it back (restore_times)
            elif after[key] != before[key]:
                raise ValueError(f"it left {key} behind")
        found: list[str] = []
        for root in WRITABLE:
            recorded(root.encode(), found)
        answer = "tree\n" + "".join(line + "\n" for line in found)
    except (OSError, ValueError, RecursionError) as exc:
        answer = "refused " + str(exc).encode().hex()
    say(1, PREPARED + answer.encode() + b"\0")
    os._exit(0)


def main() -> None:
    global config, SOURCE_FD, uid, gid, STREAM_FLAGS, PIPE_SIZES, SECCOMP, REPLAY, fresh
    # A signal mask survives execve, and under runc-direct this launcher's comes from the
    # controller through runc: a controller started with SIGALRM blocked left its containers
    # running past the backstop. Nothing here is blocked.
    signal.pthread_sigmask(signal.SIG_SETMASK, ())
    config = json_loads(sys.argv[1])
    SOURCE_FD = config["source_fd"]
    uid, gid = config["uid"], config["gid"]
    if libc.prctl(4, 0, 0, 0, 0) != 0:
        os.write(2, b"sandbox: the launcher cannot make itself non-dumpable\n")
        os._exit(1)
    STREAM_FLAGS = {fd: fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK for fd in (1, 2)}
    PIPE_SIZES = pipe_sizes()
    machine = os.uname().machine
    if machine not in config["seccomp"]:
        os.write(2, f"sandbox: no seccomp filter for this machine ({machine})\n".encode())
        os._exit(1)
    SECCOMP = bytes.fromhex(config["seccomp"][machine])
    REPLAY = config.get("replay")
    if config.get("probe"):
        probe()
    if not prepare():
        say(2, b"sandbox: the image entrypoint failed\n")
        os._exit(1)
    programs_us = 0
    try:
        # Only a container that may be reset needs the picture of its fresh state (a dozen ms of
        # this launcher's CPU): without one it serves one call only.
        fresh = state() if config.get("recycle", True) else None
        fresh_tree = tree() if fresh is not None else None
    except OSError:
        # Where a writable path or an IPC listing is missing (gVisor has no /dev/mqueue), the
        # container cannot be proved clean after a call: it serves one call only.
        fresh = fresh_tree = None
    while True:
        say(1, READY)
        request = json_loads(take(int(take(HEADER_DIGITS))))
        oom_before = oom_kills()
        signal.signal(signal.SIGALRM, backstop)
        signal.alarm(request["backstop_s"])
        source = None
        if request["source_bytes"] is not None:
            # The program's code, too long for its command line: a memory file, read once by the
            # program's bootstrap (sandbox/program.py), charged to the container's memory.
            source = os.memfd_create("program")
            view = memoryview(take(request["source_bytes"]))
            while view:
                view = view[os.write(source, view) :]
            del view
            os.lseek(source, 0, os.SEEK_SET)
        stdin, pipe = os.pipe()
        # Each call starts with the streams' own flags, whatever an earlier call left on them.
        restore_streams()
        children_before = cpu_us(resource.RUSAGE_CHILDREN)
        pid = spawn(request["argv"], stdin, source=source)
        os.close(stdin)
        if source is not None:
            os.close(source)
        fed = _thread.allocate_lock()
        fed.acquire()
        _thread.start_new_thread(feed, (request["stdin_bytes"], pipe, fed))
        code = wait(pid)
        clean = sweep()
        if clean:
            fed.acquire()
        signal.alarm(0)
        oom = int(oom_kills() > oom_before)
        reusable = int(bool(request["keep"]) and clean and not oom and fresh is not None)
        # CPU by part (process accounting of what this launcher reaped): itself so far, the
        # image's entrypoint (its runs so far), and this program with every descendant it waited for.
        program_us = cpu_us(resource.RUSAGE_CHILDREN) - children_before
        prepare_us = children_before - programs_us
        programs_us += program_us
        report = exit_report(
            request["nonce"], code, oom, reusable, cpu_us(resource.RUSAGE_SELF), prepare_us, program_us
        )
        say(1, report)
        say(2, report)
        if not reusable or take(1) != b"R":
            os._exit(0)
        # The host has read the whole call, so the stream pipes are empty: a size the program set
        # on them (F_SETPIPE_SZ, one more thing it shares with us) can be set back, or we retire.
        try:
            for fd, size in PIPE_SIZES.items():
                fcntl.fcntl(fd, F_SETPIPE_SZ, size)
        except (OSError, AttributeError):
            say(2, b"sandbox: cannot restore the size of the output pipes\n")
            os._exit(1)
        if pipe_sizes() != PIPE_SIZES:
            os._exit(1)
        if fresh_tree is not None and tree() == fresh_tree and state() == fresh:
            continue
        if not prepare(before_exec=wipe) or not restore_times():
            say(2, b"sandbox: the reset failed\n")
            os._exit(1)
        now = state()
        if now != fresh:
            changed = sorted(key for key in now if now[key] != fresh[key])
            say(2, f"sandbox: not clean after the reset: {changed!r}\n".encode())
            os._exit(1)
        fresh_tree = tree()


if __name__ == "__main__":
    main()
