"""Proctor's two seccomp layers: the engine's allowlist and the launcher's program filter.

The allowlist (``seccomp_profile.json``, the second half of this module) is what the engine
applies to every process of a docker container, under runc and runsc. The program filter below
is a denylist installed on top of it in every process the launcher demotes, and the only filter
of the local backend (bubblewrap), which has no engine profile: defence in depth, and the place
where arguments the JSON format cannot reach are judged (the low word of socket's family).

Docker's default seccomp profile (Docker 20.10 here) let an unprivileged program set up
io_uring, open ``AF_VSOCK`` sockets, and make 32-bit system calls (``int 0x80``) from a 64-bit
process; the local backend (bubblewrap) filters nothing else at all. Each of those is a way past
a fence the rest of the sandbox relies on:

* ``AF_VSOCK`` is not confined by network namespaces: with ``network_mode=none`` (docker) or a
  private network namespace (bwrap) a program could still open a stream to the hypervisor
  (CID 2) of a VM host such as this one (a Firecracker guest with ``/dev/vsock``). The same holds
  for every address family a network namespace does not fence; only ``AF_UNIX``, ``AF_INET`` and
  ``AF_INET6`` are allowed, everything else is ``EAFNOSUPPORT``.
* Netlink, routing netlink included: the replies a netlink socket queues are charged to no
  memory group (measured: 300 routing sockets fed dump requests never read held 477 MiB while
  the container's group grew by 1 MiB), and each may hold up to twice ``net.core.rmem_max``:
  a call's pids x open files of them could take the host's memory, not its own. Nothing a
  computation does needs one; glibc's ``getaddrinfo`` (``AI_ADDRCONFIG``) and ``getifaddrs``
  fall back or fail cleanly without it.
* io_uring performs its operations without passing through seccomp again, and is the largest
  source of recent kernel privilege escalations; newer Docker releases refuse it by default.
* A 64-bit process may enter the kernel through the i386 entry point, where system calls have
  other numbers and ``socketcall`` hides the address family behind a pointer no filter can
  read. Every system call of an architecture other than the native one is refused, so nothing
  in this filter can be stepped around that way (x32 numbers likewise).
* keyrings, ``bpf``, ``perf_event_open`` and ``userfaultfd``: kernel facilities no computation
  needs, refused under Docker's profile already but reachable under bwrap.
* Linux AIO (``io_setup`` and the rest): its event slots are one count for the whole host
  (``fs.aio-max-nr``, 65536), and Docker's profile allows it: one call reserved all of them,
  and every other ``io_setup`` on the host (other calls, any database or VM there) failed with
  EAGAIN until it ended. Python and glibc's POSIX aio never use it (glibc's runs on threads).

* ``memfd_secret`` (its pages leave the host kernel's direct map until reboot), the new mount
  API, landlock, ``pidfd_getfd`` and ``process_vm_*``: ENOSYS, as in the allowlist; namespaces
  (``unshare``, ``setns``, ``clone`` with a namespace flag) and ``ptrace(PTRACE_TRACEME)``, which
  would make the launcher the program's tracer: EPERM.

The filter is classic BPF (``struct sock_filter``), built here on the host and installed by the
docker launcher (in the program's forked child, after it dropped to the sandbox user) or handed
to bwrap (``--seccomp FD``). Filters stack: the engine's allowlist still applies, and where both
refuse a call the program sees this filter's errno (the kernel returns the latest filter's).
"""

from __future__ import annotations

import errno
import functools
import hashlib
import json
import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# struct seccomp_data: nr (u32), arch (u32), instruction_pointer (u64), args[6] (u64 each).
_NR = 0
_ARCH = 4
_ARG0_LOW = 16  # little-endian: the low 32 bits of args[0] (socket's int domain, clone's flags)
_ARG0_HIGH = 20

_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_X32_SYSCALL_BIT = 0x40000000

AF_UNIX = 1
AF_INET = 2
AF_INET6 = 10
# CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET: every namespace clone can make.
CLONE_NAMESPACE_FLAGS = 0x7E020000
PTRACE_TRACEME = 0


@dataclass(frozen=True)
class _Arch:
    audit_arch: int
    socket: int
    socketpair: int
    refused: dict[str, int]
    denied: dict[str, int]
    clone: int
    ptrace: int
    has_x32: bool


_ARCHES: dict[str, _Arch] = {
    "x86_64": _Arch(
        audit_arch=0xC000003E,
        socket=41,
        socketpair=53,
        refused={
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "add_key": 248,
            "request_key": 249,
            "keyctl": 250,
            "perf_event_open": 298,
            "bpf": 321,
            "userfaultfd": 323,
            "io_setup": 206,
            "io_destroy": 207,
            "io_getevents": 208,
            "io_submit": 209,
            "io_cancel": 210,
            "io_pgetevents": 333,
            # Kernel classes the allowlist (seccomp_profile.json) leaves out too: refused here
            # as well, so that the local backend, which has no engine profile, refuses them.
            "memfd_secret": 447,
            "pidfd_getfd": 438,
            "process_vm_readv": 310,
            "process_vm_writev": 311,
            "open_tree": 428,
            "move_mount": 429,
            "fsopen": 430,
            "fsconfig": 431,
            "fsmount": 432,
            "fspick": 433,
            "mount_setattr": 442,
            "landlock_create_ruleset": 444,
            "landlock_add_rule": 445,
            "landlock_restrict_self": 446,
        },
        # Namespaces: EPERM, what the kernel itself answers a process without the capability.
        denied={"unshare": 272, "setns": 308},
        clone=56,
        ptrace=101,
        has_x32=True,
    ),
    "aarch64": _Arch(
        audit_arch=0xC00000B7,
        socket=198,
        socketpair=199,
        refused={
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "add_key": 217,
            "request_key": 218,
            "keyctl": 219,
            "perf_event_open": 241,
            "bpf": 280,
            "userfaultfd": 282,
            "io_setup": 0,
            "io_destroy": 1,
            "io_submit": 2,
            "io_cancel": 3,
            "io_getevents": 4,
            "io_pgetevents": 292,
            "memfd_secret": 447,
            "pidfd_getfd": 438,
            "process_vm_readv": 270,
            "process_vm_writev": 271,
            "open_tree": 428,
            "move_mount": 429,
            "fsopen": 430,
            "fsconfig": 431,
            "fsmount": 432,
            "fspick": 433,
            "mount_setattr": 442,
            "landlock_create_ruleset": 444,
            "landlock_add_rule": 445,
            "landlock_restrict_self": 446,
        },
        denied={"unshare": 97, "setns": 268},
        clone=220,
        ptrace=117,
        has_x32=False,
    ),
}
SUPPORTED_MACHINES = tuple(sorted(_ARCHES))
REFUSED_CALLS = tuple(_ARCHES["x86_64"].refused)


class UnsupportedMachine(Exception):
    """No program filter is defined for this CPU architecture."""


@dataclass
class _Insn:
    code: int
    k: int
    true: str | None = None  # label jumped to when the test holds (None: the next instruction)
    false: str | None = None
    label: str | None = None  # this instruction's own label


def _ret(value: int, label: str | None = None) -> _Insn:
    return _Insn(_RET_K, value, label=label)


def _assemble(program: Sequence[_Insn]) -> bytes:
    where = {insn.label: index for index, insn in enumerate(program) if insn.label is not None}

    def offset(index: int, target: str | None) -> int:
        if target is None:
            return 0
        jump = where[target] - index - 1
        if not 0 <= jump <= 255:
            raise ValueError(f"seccomp jump to {target} out of range")
        return jump

    return b"".join(
        struct.pack("<HBBI", insn.code, offset(i, insn.true), offset(i, insn.false), insn.k)
        for i, insn in enumerate(program)
    )


def program_filter(machine: str | None = None) -> bytes:
    """The filter for ``machine`` (``os.uname().machine`` by default) as ``struct sock_filter[]``."""
    machine = machine or os.uname().machine
    arch = _ARCHES.get(machine)
    if arch is None:
        raise UnsupportedMachine(
            f"no sandbox seccomp filter for {machine!r} (supported: {', '.join(SUPPORTED_MACHINES)})"
        )
    program = [
        _Insn(_LD_W_ABS, _ARCH),
        _Insn(_JEQ_K, arch.audit_arch, false="nosys"),  # a foreign entry point: refuse everything
        _Insn(_LD_W_ABS, _NR),
    ]
    if arch.has_x32:
        program.append(_Insn(_JGE_K, _X32_SYSCALL_BIT, true="nosys"))
    program += [_Insn(_JEQ_K, number, true="nosys") for number in arch.refused.values()]
    program += [_Insn(_JEQ_K, number, true="perm") for number in arch.denied.values()]
    program += [
        _Insn(_JEQ_K, arch.socket, true="family"),
        _Insn(_JEQ_K, arch.socketpair, true="family"),
        _Insn(_JEQ_K, arch.clone, true="clone"),
        _Insn(_JEQ_K, arch.ptrace, true="ptrace"),
        _ret(RET_ALLOW),
        _Insn(_LD_W_ABS, _ARG0_LOW, label="family"),
        _Insn(_JEQ_K, AF_UNIX, true="allow"),
        _Insn(_JEQ_K, AF_INET, true="allow"),
        _Insn(_JEQ_K, AF_INET6, true="allow", false="noafs"),
        # Namespace flags all sit in the low word of clone's flags (x86_64 and aarch64 alike).
        _Insn(_LD_W_ABS, _ARG0_LOW, label="clone"),
        _Insn(_JSET_K, CLONE_NAMESPACE_FLAGS, true="perm", false="allow"),
        # PTRACE_TRACEME would make the program's parent (the docker launcher, bwrap's init)
        # its tracer; the request is a long, so both words must be zero.
        _Insn(_LD_W_ABS, _ARG0_LOW, label="ptrace"),
        _Insn(_JEQ_K, PTRACE_TRACEME, false="allow"),
        _Insn(_LD_W_ABS, _ARG0_HIGH),
        _Insn(_JEQ_K, 0, true="perm", false="allow"),
        _ret(RET_ALLOW, label="allow"),
        _ret(_RET_ERRNO | errno.ENOSYS, label="nosys"),
        _ret(_RET_ERRNO | errno.EAFNOSUPPORT, label="noafs"),
        _ret(_RET_ERRNO | errno.EPERM, label="perm"),
    ]
    return _assemble(program)


def filters_by_machine() -> dict[str, str]:
    """Every supported architecture's filter, hex-encoded: the docker launcher picks its own
    machine's (the engine may run on another architecture than the controller)."""
    return {machine: program_filter(machine).hex() for machine in SUPPORTED_MACHINES}


# -- The engine's allowlist ----------------------------------------------------------------------
#
# The filter above is a denylist on top of whatever the engine already filters, and so lets
# through every system call nobody thought of (memfd_secret, whose pages leave the host kernel's
# direct map for good). The engine's own profile is therefore not the engine's default but an
# allowlist of Proctor's own, pinned as data in seccomp_profile.json (Docker's JSON profile
# format). Every process in the container runs under it: docker-init, the root launcher and the
# program. What it does not allow fails with EPERM: Docker 20.10 drops a profile's
# ``defaultErrnoRet`` (measured: the default answered EPERM whatever the profile said), so EPERM
# is the one default every engine agrees on. The few calls glibc and CPython probe for and fall
# back from only on ENOSYS (clone3 above all: EPERM there and no thread could start) are refused
# with ENOSYS by a rule of their own. Each rule names the tests whose workloads need it
# (tests/sandbox/test_seccomp_allowlist.py); docs/sandbox.md carries the table :func:`docs_table`
# renders, and a test fails when the two disagree.

PROFILE_PATH = Path(__file__).with_name("seccomp_profile.json")
DOCS_BEGIN = "<!-- seccomp-allowlist:begin (generated by proctor.sandbox.docker.seccomp.docs_table) -->"
DOCS_END = "<!-- seccomp-allowlist:end -->"


class ProfileError(Exception):
    """The pinned profile is missing or not a well-formed allowlist."""


@functools.cache
def _profile_bytes() -> bytes:
    try:
        return PROFILE_PATH.read_bytes()
    except OSError as exc:
        raise ProfileError(f"cannot read the seccomp allowlist {PROFILE_PATH}: {exc.strerror}") from None


def load_profile() -> dict[str, Any]:
    """The pinned allowlist, checked: an errno default (never allow), rules that only allow or
    refuse with an errno, each naming why and which tests need it."""
    try:
        profile = json.loads(_profile_bytes())
    except ValueError as exc:
        raise ProfileError(f"{PROFILE_PATH.name} is not JSON: {exc}") from None
    if profile.get("defaultAction") != "SCMP_ACT_ERRNO":
        raise ProfileError(f"{PROFILE_PATH.name}: the default action must be SCMP_ACT_ERRNO (an allowlist)")
    for index, rule in enumerate(profile.get("syscalls") or []):
        if rule.get("action") not in ("SCMP_ACT_ALLOW", "SCMP_ACT_ERRNO"):
            raise ProfileError(f"{PROFILE_PATH.name}: rule {index} has action {rule.get('action')!r}")
        if not rule.get("names") or not rule.get("comment") or not rule.get("tests"):
            raise ProfileError(f"{PROFILE_PATH.name}: rule {index} needs names, a comment and tests")
    return dict(profile)


def allowed_syscalls() -> list[str]:
    """Every system call some rule allows (with or without conditions on its arguments)."""
    names = {
        name
        for rule in load_profile()["syscalls"]
        if rule["action"] == "SCMP_ACT_ALLOW"
        for name in rule["names"]
    }
    return sorted(names)


def profile_sha256() -> str:
    """The sha256 of the pinned file, recorded in run.json (``describe()``)."""
    return hashlib.sha256(_profile_bytes()).hexdigest()


def engine_profile(errno_honoured: bool = True) -> str:
    """The profile as ``security_opt`` sends it: the pinned file's JSON, compact.

    ``errno_honoured=False`` is for gVisor's runsc (the build Debian ships, 2022), which enforces
    the profile inside its own kernel but ignores every rule's ``errnoRet``: the ENOSYS rule would
    answer EPERM there, and glibc, refused clone3 with EPERM, could not start one thread. That
    rule's calls are allowed instead, and gVisor answers ENOSYS itself: it implements none of them
    (clone3 included, so no namespace flag reaches it unchecked; see docs/sandbox.md). Every other
    rule, and the default, are the same bytes for both runtimes.
    """
    profile = load_profile()
    if not errno_honoured:
        for rule in profile["syscalls"]:
            if rule["action"] == "SCMP_ACT_ERRNO" and rule.get("errnoRet") == errno.ENOSYS:
                rule["action"] = "SCMP_ACT_ALLOW"
                del rule["errnoRet"]
    return json.dumps(profile, separators=(",", ":"))


def describe_profile(errno_honoured: bool = True) -> dict[str, Any]:
    """What run.json records (``describe()["seccomp_profile"]``): the pinned file's hash, the
    hash of exactly what the engine was sent, and how many system calls it allows."""
    return {
        "file": "sandbox/docker/seccomp_profile.json",
        "sha256": profile_sha256(),
        "sent_sha256": hashlib.sha256(engine_profile(errno_honoured).encode()).hexdigest(),
        "allowed_syscalls": len(allowed_syscalls()),
    }


def _conditions(rule: dict[str, Any]) -> str:
    parts = []
    for arg in rule.get("args") or []:
        op = {"SCMP_CMP_EQ": "==", "SCMP_CMP_NE": "!=", "SCMP_CMP_MASKED_EQ": "&"}.get(arg["op"], arg["op"])
        if arg["op"] == "SCMP_CMP_MASKED_EQ":
            parts.append(f"arg{arg['index']} & {arg['value']:#x} == {arg['valueTwo']:#x}")
        else:
            parts.append(f"arg{arg['index']} {op} {arg['value']:#x}")
    return " and ".join(parts)


def docs_table() -> str:
    """The allowlist as the Markdown table docs/sandbox.md carries (a test checks they agree)."""
    profile = load_profile()
    lines = [
        DOCS_BEGIN,
        f"{len(allowed_syscalls())} system calls allowed (file sha256 `{profile_sha256()[:16]}…`); "
        f"every other one fails with {errno.errorcode[profile['defaultErrnoRet']]}.",
        "",
        "| system calls | when | action | why | needed by |",
        "|---|---|---|---|---|",
    ]
    for rule in profile["syscalls"]:
        action = "allow" if rule["action"] == "SCMP_ACT_ALLOW" else errno.errorcode[rule["errnoRet"]]
        tests = ", ".join(f"`{test}`" for test in rule["tests"])
        names = ", ".join(f"`{name}`" for name in rule["names"])
        when = _conditions(rule) or "always"
        lines.append(f"| {names} | {when} | {action} | {rule['comment']} | {tests} |")
    lines.append(DOCS_END)
    return "\n".join(lines)
