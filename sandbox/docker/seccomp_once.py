"""The engine's seccomp filter compiled once per template, not once per container.

runc turns the spec's seccomp profile into BPF with libseccomp in every container it starts:
about 9 ms of CPU per container on this project's machine, a fifth of runc's share of a call.
runc-direct (sandbox/docker/oci_direct.py) instead records, once per template, the filter runc itself
installed, and starts every container through a small static helper (``seccomp_exec.c``) that
installs those bytes and then ``execv``s the spec's own process. How it stays the same filter:

* **The bytes are runc's.** A probe container of the template is started by runc with the
  spec's profile, and the filter the kernel holds for its init is read back with
  ``PTRACE_SECCOMP_GET_FILTER``, its flags with ``PTRACE_SECCOMP_GET_METADATA``. (runc itself
  orders its stub's architecture checks as a Go map iterates, so its containers hold one of a
  few orderings of one program; this records one of them.)
* **Proved per template.** A second probe starts through the helper with those bytes; its
  init must hold exactly one filter, byte-for-byte the first, with the same flags and the same
  ``Seccomp``, ``NoNewPrivs`` and ``Speculation_Store_Bypass`` status. Anything else, and the
  template keeps runc compiling the profile in every container, with the reason recorded.
* **Same process, same moment.** runc installs the filter as the last step before it execs the
  spec's first argument; the helper is that last step, then the same ``execv``. The helper is
  the container's init for those few microseconds only: it takes no input but its arguments
  from the spec, and closes its own descriptor (fd 3) before the filter goes in.

The helper needs a C compiler once per source version (built into ``/run/proctor-oci/helpers``)
and ``noNewPrivileges`` in the spec (without it, runc installs the filter while it still holds
``CAP_SYS_ADMIN``, which the helper does not have).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SOURCE = Path(__file__).with_name("seccomp_exec.c")
HELPER_FD = 3
HELPER_PATH = f"/proc/self/fd/{HELPER_FD}"
_BUILD_TIMEOUT_S = 120.0
_PTRACE_SEIZE = 0x4206
_PTRACE_INTERRUPT = 0x4207
_PTRACE_DETACH = 17
_PTRACE_SECCOMP_GET_FILTER = 0x420C
_PTRACE_SECCOMP_GET_METADATA = 0x420D
_WALL = 0x40000000
# The lines of /proc/PID/status a filter's installation sets.
STATUS_KEYS = ("NoNewPrivs", "Seccomp", "Seccomp_filters", "Speculation_Store_Bypass")


@dataclass(frozen=True)
class Installed:
    """What the kernel holds for one process: its filters, newest first, each with its flags,
    and the status lines their installation set."""

    filters: tuple[tuple[bytes, int], ...]
    status: tuple[tuple[str, str], ...]


def why_not(spec: dict[str, Any]) -> str | None:
    """Why the helper cannot stand in for runc with this spec, or None when it can."""
    seccomp = (spec.get("linux") or {}).get("seccomp")
    if not seccomp:
        return "the spec has no seccomp profile"
    if seccomp.get("flags") or seccomp.get("listenerPath"):
        return "the profile sets filter flags or a notification listener"
    if any(rule.get("action") == "SCMP_ACT_NOTIFY" for rule in seccomp.get("syscalls") or []):
        return "the profile notifies a listener"
    process = spec.get("process") or {}
    if process.get("noNewPrivileges") is not True:
        return "the spec does not set noNewPrivileges"
    args = process.get("args") or []
    if not args or not str(args[0]).startswith("/"):
        return "the spec's process is not an absolute path"
    return None


def helper_binary(directory: Path) -> Path | str:
    """The helper built from :data:`SOURCE` (once per source version), or why it cannot be."""
    source = SOURCE.read_bytes()
    built = directory / f"seccomp-exec-{hashlib.sha256(source).hexdigest()[:16]}"
    if built.is_file():
        return built
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return "no C compiler (cc) to build the seccomp helper"
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    partial = directory / f".{built.name}.{os.getpid()}.{time.monotonic_ns()}"
    try:
        done = subprocess.run(
            [compiler, "-O2", "-static", "-o", str(partial), str(SOURCE)],
            capture_output=True,
            timeout=_BUILD_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0:
            said = done.stderr.decode("utf-8", "replace").strip().splitlines()
            return f"the seccomp helper did not build: {(said or ['no output'])[-1][:200]}"
        os.chmod(partial, 0o500)
        os.replace(partial, built)  # atomic: a concurrent builder's copy is the same bytes
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the seccomp helper did not build: {exc}"
    finally:
        partial.unlink(missing_ok=True)
    return built


def args_with_helper(args: list[str], filter_bytes: bytes) -> list[str]:
    """The spec's process arguments, run through the helper with ``filter_bytes``."""
    return [HELPER_PATH, filter_bytes.hex(), *args]


def status_of(pid: int) -> dict[str, str]:
    found = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in STATUS_KEYS:
                found[key] = value.strip()
    return found


def wait_until_running(pid: int, program: str, timeout: float) -> None:
    """Wait until ``pid`` runs ``program`` (runc's init, or the helper, has exec'd it) under at
    least one filter; OSError when it does not in time or is gone."""
    deadline = time.monotonic() + timeout
    while True:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            running = cmdline.read().split(b"\0", 1)[0] == program.encode()
        if running and status_of(pid).get("Seccomp_filters", "0") != "0":
            return
        if time.monotonic() > deadline:
            raise OSError(f"process {pid} did not start {program} under a filter in time")
        time.sleep(0.002)


_libc = ctypes.CDLL(None, use_errno=True)
_libc.ptrace.restype = ctypes.c_long
_libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]


class _Metadata(ctypes.Structure):
    _fields_ = [("filter_off", ctypes.c_uint64), ("flags", ctypes.c_uint64)]


def _ptrace(request: int, pid: int, addr: int, data: Any) -> int:
    result = int(_libc.ptrace(request, pid, ctypes.c_void_p(addr), data))
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"ptrace {request:#x} of {pid}: {os.strerror(errno)}")
    return result


def installed(pid: int) -> Installed:
    """The filters the kernel holds for ``pid``, read while it is stopped for a moment."""
    _ptrace(_PTRACE_SEIZE, pid, 0, None)
    try:
        _ptrace(_PTRACE_INTERRUPT, pid, 0, None)
        os.waitpid(pid, _WALL)
        filters = []
        for index in range(int(status_of(pid).get("Seccomp_filters", "0"))):
            count = _ptrace(_PTRACE_SECCOMP_GET_FILTER, pid, index, None)
            buffer = ctypes.create_string_buffer(count * 8)
            _ptrace(_PTRACE_SECCOMP_GET_FILTER, pid, index, buffer)
            metadata = _Metadata(index, 0)
            _ptrace(_PTRACE_SECCOMP_GET_METADATA, pid, ctypes.sizeof(metadata), ctypes.byref(metadata))
            filters.append((buffer.raw, int(metadata.flags)))
        status = tuple(sorted(status_of(pid).items()))
    finally:
        _libc.ptrace(_PTRACE_DETACH, pid, None, None)
    return Installed(tuple(filters), status)
