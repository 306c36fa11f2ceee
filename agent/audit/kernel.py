"""Isolation: kernel interfaces a namespace does not fence (sandbox/seccomp.py is the fix).

Two rows share one probe. ``net.unfenced_families`` opens (never connects) sockets of address
families a network namespace does not confine: ``AF_VSOCK`` talks to the hypervisor of a VM host
whatever the container's network mode. ``priv.kernel_surface`` sets up io_uring, perf events
and userfaultfd, and on x86_64 enters the kernel through the 32-bit gate (``int 0x80``), where
``socketcall`` hides the address family from any filter: it asks that gate for an ``AF_VSOCK``
socket too. Nothing is sent anywhere; every descriptor the probe gets is closed at once.
"""

from __future__ import annotations

import platform

from proctor.agent.audit.model import AuditContext, Check, Finding, Verdict, escape_text, no_reply
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
