"""Attacks through kernel interfaces that no namespace fences (the fix: sandbox/docker/seccomp.py).

Run over every backend (docker under runc and runsc, local). Nothing here sends a byte
anywhere: sockets are opened, never connected.
"""

from __future__ import annotations

import json
import platform

import pytest

from proctor.sandbox import Sandbox
from proctor.sandbox.docker.seccomp import SUPPORTED_MACHINES, UnsupportedMachine, program_filter

ASYNC = pytest.mark.asyncio(loop_scope="session")

_OPEN_FAMILIES = """
import errno, json, socket
found = {}
for name, family, protocol in (("AF_VSOCK", 40, 0), ("AF_PACKET", 17, 0), ("AF_ALG", 38, 0),
                               ("AF_TIPC", 30, 0), ("AF_RDS", 21, 0), ("AF_XDP", 44, 0), ("AF_CAN", 29, 0),
                               ("AF_BLUETOOTH", 31, 0), ("AF_KCM", 41, 0), ("AF_SMC", 43, 0),
                               ("uevent", 16, 15), ("AF_NETLINK/route", 16, 0), ("AF_UNIX", 1, 0),
                               ("AF_INET", 2, 0), ("AF_INET6", 10, 0)):
    outcome = None
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_SEQPACKET, socket.SOCK_RAW):
        try:
            socket.socket(family, kind, protocol).close()
            outcome = "OPENED"
            break
        except OSError as exc:
            outcome = outcome or errno.errorcode.get(exc.errno, str(exc.errno))
    found[name] = outcome
try:
    socket.socketpair(40, socket.SOCK_STREAM)
    found["socketpair AF_VSOCK"] = "OPENED"
except OSError as exc:
    found["socketpair AF_VSOCK"] = errno.errorcode.get(exc.errno, str(exc.errno))
# What the families still allowed are for: a loopback server and client inside the call.
server = socket.create_server(("127.0.0.1", 0))
client = socket.create_connection(server.getsockname())
conn, _ = server.accept()
client.sendall(b"ping")
found["loopback"] = conn.recv(4).decode()
print(json.dumps(found))
"""


@ASYNC
async def test_address_families_a_network_namespace_does_not_fence_cannot_be_opened(sandbox: Sandbox) -> None:
    # AF_VSOCK ignores network namespaces: with network none, a program could still open a
    # stream to the hypervisor of a VM host (this machine is one). The others add kernel
    # surface only (or carry the host's device events: uevent netlink).
    result = await sandbox.exec(_OPEN_FAMILIES, timeout=20)
    assert result.exit_code == 0, result
    found = json.loads(result.stdout)
    for name in ("AF_VSOCK", "socketpair AF_VSOCK", "AF_PACKET", "AF_ALG", "AF_TIPC", "AF_RDS", "AF_XDP"):
        assert found[name] != "OPENED", found
    for name in ("AF_CAN", "AF_BLUETOOTH", "AF_KCM", "AF_SMC", "uevent"):
        assert found[name] != "OPENED", found
    assert found["AF_VSOCK"] == "EAFNOSUPPORT", found
    for name in ("AF_UNIX", "AF_INET", "AF_INET6"):
        assert found[name] == "OPENED", found
    # Routing netlink too: see test_netlink_whose_queued_replies_no_memory_group_counts_is_refused.
    assert found["AF_NETLINK/route"] == "EAFNOSUPPORT", found
    assert found["loopback"] == "ping"


_KERNEL_FACILITIES = """
import ctypes, errno, json, os, platform
numbers = {"x86_64": {"io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
                      "perf_event_open": 298, "bpf": 321, "userfaultfd": 323, "keyctl": 250,
                      "add_key": 248, "request_key": 249},
           "aarch64": {"io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
                       "perf_event_open": 241, "bpf": 280, "userfaultfd": 282, "keyctl": 219,
                       "add_key": 217, "request_key": 218}}[platform.machine()]
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
buf = ctypes.create_string_buffer(256)
args = {"io_uring_setup": (4, buf), "io_uring_enter": (0, 1, 0, 0, 0, 0), "io_uring_register": (0, 0, 0, 0),
        "perf_event_open": (buf, 0, -1, -1, 0), "bpf": (0, buf, 72), "userfaultfd": (0,),
        "keyctl": (0, -3, 1), "add_key": (b"user", b"proctor", b"x", 1, -3),
        "request_key": (b"user", b"x", 0, 0)}
found = {}
for name, number in numbers.items():
    rc = libc.syscall(number, *args[name])
    found[name] = "SUCCEEDED" if rc >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
print(json.dumps(found))
"""


@ASYNC
async def test_io_uring_keyrings_bpf_perf_and_userfaultfd_are_refused(sandbox: Sandbox) -> None:
    # io_uring runs its operations without passing seccomp again, and is a rich source of kernel
    # escalations; the others are facilities no computation needs. The local backend had no
    # filter at all: keyctl and add_key succeeded there, io_uring_setup everywhere under runc.
    result = await sandbox.exec(_KERNEL_FACILITIES, timeout=20)
    assert result.exit_code == 0, result
    found = json.loads(result.stdout)
    assert all(outcome != "SUCCEEDED" for outcome in found.values()), found
    assert found["io_uring_setup"] == "ENOSYS", found


# push rbx; mov eax, NR; mov ebx, ARG1; mov ecx, ARG2; int 0x80; pop rbx; ret — in a page below
# 4 GiB (MAP_32BIT), since the 32-bit gate takes 32-bit pointers.
_GATE32 = """
import ctypes, json, mmap, os, socket
page = mmap.mmap(-1, 4096, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x40,
                 prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
base = ctypes.addressof(ctypes.c_char.from_buffer(page))
def gate32(nr, ebx=0, ecx=0):
    page[0:20] = (bytes([0x53, 0xB8]) + nr.to_bytes(4, "little") + bytes([0xBB]) + ebx.to_bytes(4, "little")
                  + bytes([0xB9]) + ecx.to_bytes(4, "little") + bytes([0xCD, 0x80, 0x5B, 0xC3]))
    return ctypes.CFUNCTYPE(ctypes.c_int)(base)()
found = {"getpid": gate32(20), "real_pid": os.getpid()}
# socketcall(SYS_SOCKET, [AF_VSOCK, SOCK_STREAM, 0]): the family sits behind a pointer.
page[64:76] = (40).to_bytes(4, "little") + (1).to_bytes(4, "little") + bytes(4)
rc = gate32(102, 1, base + 64)
found["socketcall_vsock"] = rc
if rc >= 0:
    try:
        found["socketcall_family"] = socket.socket(fileno=rc).family
    except OSError:
        found["socketcall_family"] = None
print(json.dumps(found))
"""


@ASYNC
@pytest.mark.skipif(platform.machine() != "x86_64", reason="the 32-bit gate is an x86_64 matter")
async def test_the_32_bit_system_call_gate_is_closed(sandbox: Sandbox, sandbox_runtime: str | None) -> None:
    # A 64-bit process may still enter through int 0x80, where calls have other numbers and
    # socketcall hides the address family from any filter: every call there is refused.
    if sandbox_runtime == "runsc":
        pytest.skip("gVisor has no MAP_32BIT and no 32-bit gate (int 0x80 runs a 64-bit call there)")
    result = await sandbox.exec(_GATE32, timeout=20)
    assert result.exit_code == 0, result
    found = json.loads(result.stdout)
    assert found["getpid"] == -38, found  # -ENOSYS, not a pid
    assert found["socketcall_vsock"] == -38, found


def test_every_supported_machine_has_a_well_formed_filter_and_others_are_refused() -> None:
    for machine in SUPPORTED_MACHINES:
        data = program_filter(machine)
        assert data and len(data) % 8 == 0 and len(data) // 8 < 4096
    with pytest.raises(UnsupportedMachine):
        program_filter("mips")


# kernel.pty.max (4096) less kernel.pty.reserve (1024) is one count shared by every container
# and bwrap sandbox on the host: a call holding 3072 pseudo-terminals (a dozen processes of 256
# each) would leave every other call's openpty() failing until it ends. So there are none.
_OPEN_PTYS = """
import errno, json, os
found = {}
for name, action in (("openpty", os.openpty), ("open /dev/ptmx", lambda: os.open("/dev/ptmx", os.O_RDWR)),
                     ("open /dev/pts/ptmx", lambda: os.open("/dev/pts/ptmx", os.O_RDWR))):
    try:
        action()
        found[name] = "OPENED"
    except OSError as exc:
        found[name] = errno.errorcode.get(exc.errno, str(exc.errno))
found["/dev/pts"] = sorted(os.listdir("/dev/pts")) if os.path.isdir("/dev/pts") else None
try:
    open("/dev/pts/planted", "w").close()
    found["plant"] = "WRITTEN"
except OSError as exc:
    found["plant"] = errno.errorcode.get(exc.errno, str(exc.errno))
print(json.dumps(found))
"""


@ASYNC
async def test_no_pseudo_terminals_whose_host_wide_count_one_call_could_exhaust(sandbox: Sandbox) -> None:
    result = await sandbox.exec(_OPEN_PTYS, timeout=30)
    assert result.exit_code == 0, result
    found = json.loads(result.stdout)
    assert "OPENED" not in found.values(), found
    assert found["plant"] != "WRITTEN", found


# Loopback traffic of the program's own, never read: every byte sent sits in a socket buffer.
# Before sandbox/docker/socket_memory.py, cgroup v1 charged none of it to the call (60 TCP pairs held
# 955 MiB beside a memory group at 11 MiB; UDP receive queues took the host's whole udp_mem,
# 2.2 GiB), and tcp_mem/udp_mem are one pool for every socket on the host.
_FILL_SOCKET_BUFFERS = """
import json, socket
CAP = 256 << 20
chunk = b"x" * 65536
server = socket.create_server(("127.0.0.1", 0), backlog=256)
held, tcp, stalled = [], 0, 0
while tcp < CAP and len(held) < 200 and stalled < 20:
    client = socket.create_connection(server.getsockname())
    accepted, _ = server.accept()
    progress = 0
    for end in (client, accepted):
        end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 30)
        end.setblocking(False)
        try:
            while tcp < CAP:
                sent = end.send(chunk)
                tcp += sent
                progress += sent
        except OSError:
            pass
    held.append((client, accepted))
    stalled = stalled + 1 if progress < len(chunk) else 0
sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sender.setblocking(False)
receivers, attempted = [], 0
datagram = b"y" * 60000
while attempted < CAP and len(receivers) < 300:
    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    receiver.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 30)
    receiver.bind(("127.0.0.1", 0))
    receiver.setblocking(False)
    receivers.append(receiver)
    for _ in range(80):
        try:
            attempted += sender.sendto(datagram, receiver.getsockname())
        except OSError:
            break
udp = 0
for receiver in receivers:
    try:
        while True:
            udp += len(receiver.recv(65536))
    except OSError:
        pass
print(json.dumps({"tcp": tcp, "udp": udp, "tcp_pairs": len(held), "udp_attempted": attempted}))
"""


@ASYNC
async def test_socket_buffers_are_bounded_by_the_call_not_by_the_hosts_shared_pool(
    sandbox: Sandbox, sandbox_runtime: str | None
) -> None:
    from proctor.sandbox.docker.socket_memory import SOCKET_BUFFER_BYTES

    if sandbox_runtime == "runsc":
        pytest.skip("gVisor's network stack lives in the sentry: its buffers are the container's memory")
    result = await sandbox.exec(_FILL_SOCKET_BUFFERS, timeout=60)
    assert result.exit_code == 0, result
    found = json.loads(result.stdout)
    # Some bytes always get through (each socket keeps a minimum); never a multiple of the bound.
    assert found["tcp"] + found["udp"] < 3 * SOCKET_BUFFER_BYTES, found


# fs.aio-max-nr (65536) is one count for the whole host and Docker's profile allows io_setup:
# one call reserved every slot (measured: aio-nr 65536/65536, EAGAIN for any other io_setup on
# the host until the call ended). Asking for a few slots is enough to show the gate is shut.
_AIO = """
import ctypes, errno, json, platform
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
number = {"x86_64": 206, "aarch64": 0}[platform.machine()]
context = ctypes.c_ulong(0)
rc = libc.syscall(number, 64, ctypes.byref(context))
print(json.dumps("RESERVED" if rc == 0 else errno.errorcode.get(ctypes.get_errno(), "?")))
"""


@ASYNC
async def test_linux_aio_whose_event_slots_are_one_host_wide_count_is_refused(sandbox: Sandbox) -> None:
    result = await sandbox.exec(_AIO, timeout=20)
    assert result.exit_code == 0, result
    assert json.loads(result.stdout) == "ENOSYS", result


# A routing netlink socket answers dump requests into its receive queue, and those replies are
# charged to no memory group (measured: 300 sockets fed requests never read held 477 MiB while
# the container's group grew by 1 MiB), up to twice net.core.rmem_max each: pids x open files
# of them could take the host's memory. The program asks for one and, had it one, fills it; the
# name lookups it was allowed for still work without it.
_NETLINK_FLOOD = """
import errno, json, socket, struct
found = {}
request = struct.pack("=LHHLL", 32, 18, 0x301, 1, 0) + bytes(16)  # RTM_GETLINK, NLM_F_DUMP
held, queued = [], 0
try:
    for _ in range(50):
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 30)
        sock.setblocking(False)
        for _ in range(500):
            try:
                sock.send(request)
            except OSError:
                break
        held.append(sock)
    found["socket"] = "OPENED"
except OSError as exc:
    found["socket"] = errno.errorcode.get(exc.errno, str(exc.errno))
with open("/proc/net/netlink") as fh:
    found["queued"] = sum(int(line.split()[4]) for line in fh.read().splitlines()[1:])
found["lookup"] = socket.getaddrinfo("127.0.0.1", 80, flags=socket.AI_ADDRCONFIG)[0][4][0]
print(json.dumps(found))
"""


@ASYNC
async def test_netlink_whose_queued_replies_no_memory_group_counts_is_refused(
    sandbox: Sandbox, sandbox_runtime: str | None
) -> None:
    result = await sandbox.exec(_NETLINK_FLOOD, timeout=30)
    assert result.exit_code == 0, result
    found = json.loads(result.stdout)
    assert found["socket"] == "EAFNOSUPPORT", found
    if sandbox_runtime != "runsc":  # gVisor's /proc/net/netlink lists nothing either way
        assert found["queued"] == 0, found
    assert found["lookup"] == "127.0.0.1"
