"""Isolation: kernel interfaces a namespace does not fence (sandbox/docker/seccomp.py is the fix).

Two rows share one probe. ``net.unfenced_families`` opens (never connects) sockets of address
families a network namespace does not confine: ``AF_VSOCK`` talks to the hypervisor of a VM host
whatever the container's network mode. ``priv.kernel_surface`` sets up io_uring, perf events
and userfaultfd, and on x86_64 enters the kernel through the 32-bit gate (``int 0x80``), where
``socketcall`` hides the address family from any filter: it asks that gate for an ``AF_VSOCK``
socket too. Nothing is sent anywhere; every descriptor the probe gets is closed at once.
"""

from __future__ import annotations

import platform

from proctor.agent.audit.model import (
    COMMAND_TRACEME,
    INSPECT,
    INSPECT_TRACEME,
    PROCTOR_BACKENDS,
    AuditContext,
    Check,
    Finding,
    Verdict,
    escape_text,
    no_reply,
)
from proctor.agent.audit.shared import shared_probe

NETWORK = "isolation: network"
PRIVILEGES = "isolation: privileges"

_NUMBERS = {
    "x86_64": {"io_uring_setup": 425, "perf_event_open": 298, "userfaultfd": 323},
    "aarch64": {"io_uring_setup": 425, "perf_event_open": 241, "userfaultfd": 282},
}
# (name, family, protocol) of families no network namespace fences, or that only add kernel
# surface; NETLINK_KOBJECT_UEVENT would carry the host's device events.
UNFENCED = (
    ("AF_VSOCK", 40, 0),
    ("AF_PACKET", 17, 0),
    ("AF_ALG", 38, 0),
    ("AF_TIPC", 30, 0),
    ("AF_RDS", 21, 0),
    ("AF_XDP", 44, 0),
    ("AF_CAN", 29, 0),
    ("AF_BLUETOOTH", 31, 0),
    ("NETLINK_KOBJECT_UEVENT", 16, 15),
)


def _probe() -> str:
    machine = platform.machine()
    numbers = _NUMBERS.get(machine, _NUMBERS["x86_64"])
    return f"""\
import ctypes, errno, mmap, os, platform, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def err(code=None):
    code = ctypes.get_errno() if code is None else code
    return errno.errorcode.get(code, str(code))
out = {{"families": {{}}, "calls": {{}}, "gate32": None}}
for name, family, protocol in {UNFENCED!r}:
    outcome = None
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_SEQPACKET, socket.SOCK_RAW):
        try:
            socket.socket(family, kind, protocol).close()
            outcome = "OPENED"
            break
        except OSError as exc:
            outcome = outcome or err(exc.errno)
    out["families"][name] = outcome
buf = ctypes.create_string_buffer(256)
for name, args in (("io_uring_setup", (4, buf)), ("perf_event_open", (buf, 0, -1, -1, 0)),
                   ("userfaultfd", (0,))):
    rc = libc.syscall({numbers}[name], *args)
    out["calls"][name] = "SUCCEEDED" if rc >= 0 else err()
    if rc >= 0:
        os.close(rc)
if platform.machine() == "x86_64":
    # Code and arguments below 4 GiB (MAP_32BIT): the 32-bit gate sees 32-bit pointers.
    try:
        page = mmap.mmap(-1, 4096, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x40,
                         prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    except OSError as exc:  # gVisor has no MAP_32BIT: no 32-bit gate to try
        report(gate32_unavailable="mmap(MAP_32BIT) " + err(exc.errno), **out)
        raise SystemExit(0)
    base = ctypes.addressof(ctypes.c_char.from_buffer(page))
    args = base + 64
    page[64:76] = (40).to_bytes(4, "little") + (1).to_bytes(4, "little") + bytes(4)
    # push rbx; mov eax, 102 (socketcall); mov ebx, 1 (SYS_SOCKET); mov ecx, args; int 0x80; pop rbx; ret
    page[0:20] = (bytes([0x53, 0xB8, 102, 0, 0, 0, 0xBB, 1, 0, 0, 0, 0xB9]) + args.to_bytes(4, "little")
                  + bytes([0xCD, 0x80, 0x5B, 0xC3]))
    rc = ctypes.CFUNCTYPE(ctypes.c_int)(base)()
    if rc < 0:
        out["gate32"] = err(-rc)
    else:
        # gVisor does not treat int 0x80 as a system call: check that a real socket came back.
        try:
            opened = socket.socket(fileno=rc)
        except OSError as exc:
            out["gate32"] = "returned %d, not a socket (%s)" % (rc, err(exc.errno))
        else:
            out["gate32"] = "OPENED AF_VSOCK" if opened.family == 40 else "returned %r" % opened
            opened.close()
report(**out)
"""


async def _kernel(ctx: AuditContext) -> tuple[Finding | None, dict[str, object]]:
    result, reply = await shared_probe(ctx, "kernel_surface", _probe(), timeout=15.0)
    if reply is None:
        return no_reply(result), {}
    return None, reply


async def unfenced_families(ctx: AuditContext) -> Finding:
    failed, reply = await _kernel(ctx)
    if failed is not None:
        return failed
    families: dict[str, str] = reply["families"]  # type: ignore[assignment]
    evidence = escape_text(f"socket() per family: {families}")
    opened = sorted(name for name, outcome in families.items() if outcome == "OPENED")
    if "AF_VSOCK" in opened:
        return Finding(
            Verdict.BROKEN, "opened an AF_VSOCK socket: a way past the network namespace", evidence
        )
    if opened:
        return Finding(Verdict.WEAK, f"opened {', '.join(opened)} (kernel surface, no network)", evidence)
    return Finding(Verdict.HELD, "every such family refused", evidence)


async def kernel_surface(ctx: AuditContext) -> Finding:
    failed, reply = await _kernel(ctx)
    if failed is not None:
        return failed
    calls: dict[str, str] = reply["calls"]  # type: ignore[assignment]
    gate32 = reply["gate32"]
    tried = gate32 or reply.get("gate32_unavailable") or "not x86_64"
    evidence = escape_text(f"{calls}; 32-bit socketcall(AF_VSOCK): {tried}")
    if gate32 == "OPENED AF_VSOCK":
        return Finding(Verdict.BROKEN, "the 32-bit gate opened what the 64-bit one refuses", evidence)
    reached = sorted(name for name, outcome in calls.items() if outcome == "SUCCEEDED")
    if reached:
        return Finding(Verdict.WEAK, f"{', '.join(reached)} reached the kernel", evidence)
    return Finding(Verdict.HELD, "all refused before reaching the kernel", evidence)


CHECKS = [
    Check(
        "net.unfenced_families",
        NETWORK,
        "open AF_VSOCK, AF_PACKET, AF_ALG, AF_TIPC, AF_RDS, AF_XDP, AF_CAN, AF_BLUETOOTH, uevent netlink",
        "every family refused",
        unfenced_families,
        quick=True,
    ),
    Check(
        "priv.kernel_surface",
        PRIVILEGES,
        "io_uring_setup, perf_event_open, userfaultfd; socketcall(AF_VSOCK) through the 32-bit gate",
        "all refused",
        kernel_surface,
    ),
]


# -- The system-call allowlist and the kernel classes it leaves out (issue 28) -------------------
#
# Under docker every process runs under Proctor's own allowlist (sandbox/docker/seccomp_profile.json),
# not the engine's default; the launcher's denylist refuses the same classes on every backend.
# The probe asks for each class once, as a hostile program would, and keeps nothing it gets:
# memfd_secret's descriptor is closed unmapped (no page leaves the host's direct map), the child
# it reads and traces is its own and is killed. Two harmless calls the engines' default profiles
# allow and the allowlist does not (ioprio_get, syncfs on the tmpfs /tmp) show which one is in
# force. PTRACE_TRACEME comes last, from the program's main process, and the probe then exits.

_CLASS_NUMBERS = {
    "x86_64": {
        "memfd_secret": 447, "fsopen": 430, "fsmount": 432, "open_tree": 428, "move_mount": 429,
        "landlock_create_ruleset": 444, "pidfd_getfd": 438, "process_vm_readv": 310,
        "process_vm_writev": 311, "ptrace": 101, "ioprio_get": 252, "syncfs": 306,
    },
    "aarch64": {
        "memfd_secret": 447, "fsopen": 430, "fsmount": 432, "open_tree": 428, "move_mount": 429,
        "landlock_create_ruleset": 444, "pidfd_getfd": 438, "process_vm_readv": 270,
        "process_vm_writev": 271, "ptrace": 117, "ioprio_get": 31, "syncfs": 267,
    },
}  # fmt: skip


def _classes_probe() -> str:
    numbers = _CLASS_NUMBERS.get(platform.machine(), _CLASS_NUMBERS["x86_64"])
    return f"""\
import ctypes, errno, os, signal, time
N = {numbers!r}
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
out = {{}}
def probe(label, name, *args):
    rc = libc.syscall(N[name], *args)
    out[label] = "SUCCEEDED" if rc >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
    # Descriptors are closed; landlock's version query and the others return a number, not one.
    if rc > 2 and name in ("memfd_secret", "fsopen", "fsmount", "open_tree", "pidfd_getfd"):
        try:
            os.close(rc)
        except OSError:
            pass
probe("memfd_secret", "memfd_secret", 0)
probe("fsopen", "fsopen", b"tmpfs", 0)
probe("fsmount", "fsmount", -1, 0, 0)
probe("open_tree", "open_tree", -100, b"/tmp", 1)
probe("move_mount", "move_mount", -1, b"", -100, b"/tmp", 0)
probe("landlock_create_ruleset", "landlock_create_ruleset", None, 0, 1)
probe("ioprio_get", "ioprio_get", 1, 0)
tmp = os.open("/tmp", os.O_RDONLY)
probe("syncfs", "syncfs", tmp)
os.close(tmp)
child = os.fork()
if child == 0:
    time.sleep(20)
    os._exit(0)
class IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
data = ctypes.create_string_buffer(16)
vec = IoVec(ctypes.addressof(data), 16)
probe("process_vm_readv", "process_vm_readv", child, ctypes.byref(vec), 1, ctypes.byref(vec), 1, 0)
probe("process_vm_writev", "process_vm_writev", child, ctypes.byref(vec), 1, ctypes.byref(vec), 1, 0)
try:
    pidfd = os.pidfd_open(child)
    probe("pidfd_getfd", "pidfd_getfd", pidfd, 0, 0)
    os.close(pidfd)
except OSError as exc:
    out["pidfd_getfd"] = "pidfd_open " + errno.errorcode.get(exc.errno, "?")
os.kill(child, signal.SIGKILL)
os.waitpid(child, 0)
probe("PTRACE_TRACEME", "ptrace", 0, 0, 0, 0)
report(**out)
"""


async def _classes(ctx: AuditContext) -> tuple[Finding | None, dict[str, str]]:
    result, reply = await shared_probe(ctx, "kernel_classes", _classes_probe(), timeout=15.0)
    if reply is None:
        return no_reply(result), {}
    return None, {key: str(value) for key, value in reply.items()}


def _allowlist_described(ctx: AuditContext) -> str:
    profile = ctx.sandbox.describe().get("seccomp_profile")
    if not isinstance(profile, dict):
        return "no engine allowlist on this backend (the launcher's denylist only)"
    digest = str(profile.get("sha256"))[:16]
    return f"allowlist of {profile.get('allowed_syscalls')} system calls, sha256 {digest}"


async def syscall_allowlist(ctx: AuditContext) -> Finding:
    failed, reply = await _classes(ctx)
    if failed is not None:
        return failed
    described = _allowlist_described(ctx)
    canaries = {name: reply[name] for name in ("ioprio_get", "syncfs")}
    evidence = escape_text(f"{described}; calls outside it: {canaries}")
    if "SUCCEEDED" in canaries.values():
        return Finding(
            Verdict.WEAK, f"{described}; a call nobody listed reached the kernel (a denylist)", evidence
        )
    return Finding(Verdict.HELD, f"{described}; calls outside it refused", evidence)


async def memfd_secret(ctx: AuditContext) -> Finding:
    failed, reply = await _classes(ctx)
    if failed is not None:
        return failed
    evidence = escape_text(f"memfd_secret(0): {reply['memfd_secret']}")
    if reply["memfd_secret"] == "SUCCEEDED":
        return Finding(
            Verdict.BROKEN,
            "memfd_secret allowed: its pages split the host's direct map until reboot",
            evidence,
        )
    return Finding(Verdict.HELD, "refused", evidence)


_CLASS_ROWS = ("fsopen", "fsmount", "open_tree", "move_mount", "landlock_create_ruleset", "pidfd_getfd",
               "process_vm_readv", "process_vm_writev")  # fmt: skip


async def kernel_classes(ctx: AuditContext) -> Finding:
    failed, reply = await _classes(ctx)
    if failed is not None:
        return failed
    outcomes = {name: reply[name] for name in _CLASS_ROWS}
    evidence = escape_text(str(outcomes))
    reached = sorted(name for name, outcome in outcomes.items() if outcome == "SUCCEEDED")
    if reached:
        return Finding(Verdict.WEAK, f"{', '.join(reached)} reached the kernel", evidence)
    return Finding(Verdict.HELD, "all refused", evidence)


async def ptrace_traceme(ctx: AuditContext) -> Finding:
    failed, reply = await _classes(ctx)
    if failed is not None:
        return failed
    evidence = escape_text(
        f"ptrace(PTRACE_TRACEME) from the program's main process: {reply['PTRACE_TRACEME']}"
    )
    if reply["PTRACE_TRACEME"] == "SUCCEEDED":
        return Finding(Verdict.BROKEN, "made its parent (the launcher) its tracer", evidence)
    return Finding(Verdict.HELD, "refused", evidence)


CHECKS += [
    Check(
        "priv.syscall_allowlist",
        PRIVILEGES,
        "read the sandbox's allowlist; ioprio_get and syncfs, which engines' default profiles allow",
        "an allowlist of Proctor's own; both refused",
        syscall_allowlist,
    ),
    Check(
        "priv.memfd_secret",
        PRIVILEGES,
        "memfd_secret (each secret page splits the host kernel's direct map until reboot)",
        "refused",
        memfd_secret,
        quick=True,
    ),
    Check(
        "priv.kernel_classes",
        PRIVILEGES,
        "the new mount API, landlock, pidfd_getfd and process_vm_readv/writev on its own child",
        "all refused",
        kernel_classes,
    ),
    Check(
        "priv.traceme",
        PRIVILEGES,
        "ptrace(PTRACE_TRACEME) from the program's main process",
        "refused (EPERM)",
        ptrace_traceme,
        quick=True,
        backends=PROCTOR_BACKENDS,
        not_applicable={"command": COMMAND_TRACEME, INSPECT: INSPECT_TRACEME},
    ),
]
