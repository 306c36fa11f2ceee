"""Isolation: host files, the engine's socket, privileges, /proc and the environment."""

from __future__ import annotations

import contextlib
import os
import platform
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from proctor.agent.audit.model import AuditContext, Check, Finding, Verdict, escape_text, no_reply, run_probe
from proctor.agent.audit.shared import shared_probe

FILES = "isolation: host files"
PRIVILEGES = "isolation: privileges"
PROC = "isolation: /proc and environment"

ENGINE_SOCKETS = (
    "/var/run/docker.sock",
    "/run/docker.sock",
    "/run/containerd/containerd.sock",
    "/var/run/containerd/containerd.sock",
    "/run/podman/podman.sock",
    "/var/run/crio/crio.sock",
)


@contextlib.contextmanager
def _host_canary_file() -> Iterator[tuple[Path, str]]:
    """A file only the host has, readable by anyone who can see it; removed afterwards."""
    token = secrets.token_hex(16)
    base = "/var/tmp" if os.path.isdir("/var/tmp") and os.access("/var/tmp", os.W_OK) else None
    directory = Path(tempfile.mkdtemp(prefix="proctor-audit-", dir=base))
    try:
        directory.chmod(0o755)
        canary = directory / "canary.txt"
        canary.write_text(token, encoding="utf-8")
        canary.chmod(0o644)
        yield canary, token
    finally:
        shutil.rmtree(directory, ignore_errors=True)


async def host_files(ctx: AuditContext) -> Finding:
    with _host_canary_file() as (canary, token):
        body = (
            "import os\n"
            f"path = {str(canary)!r}\n"
            "try:\n"
            "    seen = open(path).read()\n"
            "except OSError as exc:\n"
            "    seen = 'unreadable: ' + type(exc).__name__\n"
            "report(seen=seen)\n"
        )
        result, reply = await run_probe(ctx, body)
    if reply is None:
        return no_reply(result)
    seen = str(reply.get("seen"))
    evidence = escape_text(f"{canary}: {seen[:60]}")
    if token in seen:
        return Finding(Verdict.BROKEN, "read a file the audit wrote on the host", evidence)
    return Finding(Verdict.HELD, "the host's file is not visible", evidence)


async def engine_socket(ctx: AuditContext) -> Finding:
    body = (
        "import os, socket, errno\n"
        f"found = {{}}\n"
        f"for path in {list(ENGINE_SOCKETS)!r}:\n"
        "    if not os.path.exists(path):\n"
        "        continue\n"
        "    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
        "    sock.settimeout(1)\n"
        "    try:\n"
        "        sock.connect(path)\n"
        "        found[path] = 'CONNECTED'\n"
        "    except OSError as exc:\n"
        "        found[path] = 'exists, ' + errno.errorcode.get(exc.errno, str(exc.errno))\n"
        "    sock.close()\n"
        "report(found=found)\n"
    )
    result, reply = await run_probe(ctx, body)
    if reply is None:
        return no_reply(result)
    found: dict[str, str] = reply.get("found") or {}
    evidence = escape_text(
        str(found) if found else f"none of {len(ENGINE_SOCKETS)} known engine sockets exists"
    )
    if any(v == "CONNECTED" for v in found.values()):
        return Finding(Verdict.BROKEN, "connected to a container engine's socket", evidence)
    if found:
        return Finding(Verdict.WEAK, "an engine socket is visible but refused the connection", evidence)
    return Finding(Verdict.HELD, "no engine socket is visible", evidence)


def _syscall_numbers() -> dict[str, int]:
    machine = platform.machine()
    if machine in ("aarch64", "arm64"):
        return {"bpf": 280, "keyctl": 219, "ptrace": 117}
    return {"bpf": 321, "keyctl": 250, "ptrace": 101}


def _privileges_probe() -> str:
    numbers = _syscall_numbers()
    return f"""\
import ctypes, ctypes.util, errno, os, signal
libc = ctypes.CDLL(None, use_errno=True)
def err():
    return errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
lines = open("/proc/self/status").read().splitlines()
status = dict(line.split(":\\t", 1) for line in lines if ":\\t" in line)
caps = {{k: status.get(k, "?").strip() for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")}}
if caps["CapAmb"] == "?":
    # gVisor's /proc/self/status has no CapAmb line: ask the kernel, one capability at a time.
    caps["CapAmb"] = "%016x" % sum(1 << c for c in range(64) if libc.prctl(47, 1, c, 0, 0) == 1)
# What the kernel enforces is PR_GET_NO_NEW_PRIVS; gVisor's status has no NoNewPrivs line.
nnp = libc.prctl(39, 0, 0, 0, 0)
out = {{"caps": caps, "nnp": str(nnp) if nnp >= 0 else status.get("NoNewPrivs", "?").strip(),
       "nnp_status_line": status.get("NoNewPrivs", "absent").strip(),
       "uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid()}}
def try_call(fn):
    try:
        fn()
        return "SUCCEEDED"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
out["setuid0"] = try_call(lambda: os.setuid(0)) if os.getuid() != 0 else "already uid 0"
out["setgid0"] = try_call(lambda: os.setgid(0)) if os.getgid() != 0 else "already gid 0"
setuid_bins = []
for d in ("/bin", "/usr/bin", "/sbin", "/usr/sbin", "/usr/local/bin"):
    try:
        for name in os.listdir(d):
            try:
                if os.stat(os.path.join(d, name)).st_mode & 0o4000:
                    setuid_bins.append(os.path.join(d, name))
            except OSError:
                pass
    except OSError:
        pass
out["setuid_bins"] = sorted(set(setuid_bins))[:10]
os.makedirs("/tmp/audit-mnt", exist_ok=True)
rc = libc.mount(b"none", b"/tmp/audit-mnt", b"tmpfs", 0, None)
out["mount"] = "SUCCEEDED" if rc == 0 else err()
if rc == 0:
    libc.umount2(b"/tmp/audit-mnt", 2)
def in_child(flags):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        rc = libc.unshare(flags)
        os.write(w, (("SUCCEEDED" if rc == 0 else err())).encode())
        os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    text = os.read(r, 100).decode()
    os.close(r)
    return text
out["unshare"] = {{name: in_child(flag) for name, flag in (("user", 0x10000000), ("mount", 0x00020000),
                                                    ("net", 0x40000000), ("pid", 0x20000000))}}
libc.syscall.restype = ctypes.c_long
attr = ctypes.create_string_buffer(128)
rc = libc.syscall({numbers["bpf"]}, 0, attr, 128)
out["bpf"] = "SUCCEEDED" if rc >= 0 else err()
rc = libc.syscall({numbers["keyctl"]}, 0, ctypes.c_long(-3), 0)
out["keyctl"] = "SUCCEEDED" if rc >= 0 else err()
mine = {{os.getpid()}}
targets = {{}}
for entry in os.listdir("/proc"):
    if not entry.isdigit() or int(entry) in mine:
        continue
    pid = int(entry)
    rc = libc.syscall({numbers["ptrace"]}, 16, pid, 0, 0)
    if rc == 0:
        os.waitpid(pid, getattr(os, "__WALL", 0x40000000))
        libc.syscall({numbers["ptrace"]}, 17, pid, 0, 0)
        targets[pid] = "ATTACHED"
    else:
        targets[pid] = err()
out["ptrace"] = targets
report(**out)
"""


async def _privileges(ctx: AuditContext) -> tuple[Finding | None, dict[str, object]]:
    result, reply = await shared_probe(ctx, "privileges", _privileges_probe(), timeout=15.0)
    if reply is None:
        return no_reply(result), {}
    return None, reply


async def capabilities(ctx: AuditContext) -> Finding:
    failed, reply = await _privileges(ctx)
    if failed is not None:
        return failed
    caps: dict[str, str] = reply["caps"]  # type: ignore[assignment]
    evidence = escape_text(
        f"{caps}; no_new_privs {reply['nnp']} (prctl; /proc/self/status line: "
        f"{reply.get('nnp_status_line', '?')})"
    )
    held = [k for k in ("CapInh", "CapPrm", "CapEff", "CapAmb") if int(caps.get(k, "1") or "1", 16) != 0]
    if held:
        return Finding(Verdict.BROKEN, f"capabilities present in {', '.join(held)}", evidence)
    if int(caps.get("CapBnd", "1") or "1", 16) != 0 or reply["nnp"] != "1":
        return Finding(
            Verdict.WEAK, "no capabilities now, but the bounding set or no_new_privs leaves a way", evidence
        )
    return Finding(Verdict.HELD, "no capabilities in any set; no_new_privs on", evidence)


async def non_root(ctx: AuditContext) -> Finding:
    failed, reply = await _privileges(ctx)
    if failed is not None:
        return failed
    evidence = escape_text(f"uid {reply['uid']} euid {reply['euid']} gid {reply['gid']}")
    if reply["uid"] == 0 or reply["euid"] == 0:
        return Finding(Verdict.BROKEN, "the program runs as uid 0 (owner of root's files)", evidence)
    return Finding(Verdict.HELD, f"uid {reply['uid']}", evidence)


async def setuid(ctx: AuditContext) -> Finding:
    failed, reply = await _privileges(ctx)
    if failed is not None:
        return failed
    evidence = escape_text(
        f"setuid(0): {reply['setuid0']}; setgid(0): {reply['setgid0']}; NoNewPrivs {reply['nnp']}; "
        f"setuid binaries: {reply['setuid_bins']}"
    )
    if "SUCCEEDED" in (reply["setuid0"], reply["setgid0"]):
        return Finding(Verdict.BROKEN, "became root", evidence)
    if reply["setuid_bins"] and reply["nnp"] != "1":
        return Finding(Verdict.BROKEN, "setuid binaries can raise privileges (no_new_privs off)", evidence)
    if reply["uid"] == 0:
        return Finding(Verdict.BROKEN, "already uid 0", evidence)
    return Finding(Verdict.HELD, "setuid(0) refused; setuid bits ignored", evidence)


async def mount_unshare(ctx: AuditContext) -> Finding:
    failed, reply = await _privileges(ctx)
    if failed is not None:
        return failed
    unshare: dict[str, str] = reply["unshare"]  # type: ignore[assignment]
    evidence = escape_text(f"mount tmpfs: {reply['mount']}; unshare: {unshare}")
    if reply["mount"] == "SUCCEEDED" or any(unshare.get(k) == "SUCCEEDED" for k in ("mount", "net", "pid")):
        return Finding(Verdict.BROKEN, "mounted or made a namespace with privileges", evidence)
    if unshare.get("user") == "SUCCEEDED":
        return Finding(Verdict.WEAK, "may create user namespaces (more kernel surface)", evidence)
    return Finding(Verdict.HELD, "mount and every unshare refused", evidence)


async def ptrace(ctx: AuditContext) -> Finding:
    failed, reply = await _privileges(ctx)
    if failed is not None:
        return failed
    targets: dict[str, str] = reply["ptrace"]  # type: ignore[assignment]
    attached = sorted(pid for pid, outcome in targets.items() if outcome == "ATTACHED")
    evidence = escape_text(f"PTRACE_ATTACH per pid: {targets}")
    if attached:
        return Finding(Verdict.BROKEN, f"attached to pid(s) {', '.join(attached)} it did not start", evidence)
    return Finding(Verdict.HELD, f"refused for all {len(targets)} other process(es)", evidence)


async def bpf_keyctl(ctx: AuditContext) -> Finding:
    failed, reply = await _privileges(ctx)
    if failed is not None:
        return failed
    evidence = escape_text(
        f"bpf(BPF_MAP_CREATE): {reply['bpf']}; keyctl(GET_KEYRING_ID session): {reply['keyctl']}"
    )
    refused = ("EPERM", "ENOSYS", "EACCES")
    if reply["bpf"] == "SUCCEEDED":
        return Finding(Verdict.BROKEN, "created a bpf object", evidence)
    if reply["bpf"] not in refused or reply["keyctl"] not in refused:
        return Finding(Verdict.WEAK, "bpf or keyctl reached the kernel (not filtered)", evidence)
    return Finding(Verdict.HELD, "both refused before reaching the kernel", evidence)


@contextlib.contextmanager
def _host_canary_process() -> Iterator[str]:
    """A host process whose command line carries a token; killed by its own PID afterwards."""
    token = f"proctor-audit-canary-{secrets.token_hex(8)}"
    process = subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", "import time; time.sleep(120)", token],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield token
    finally:
        process.kill()
        process.wait()


async def host_processes(ctx: AuditContext) -> Finding:
    with _host_canary_process() as token:
        body = (
            "import os\n"
            "pids = [p for p in os.listdir('/proc') if p.isdigit()]\n"
            "seen = []\n"
            "for pid in pids:\n"
            "    if int(pid) == os.getpid():\n"
            "        continue  # its own command line holds the token\n"
            "    try:\n"
            # A whole argument equal to the token: other command lines may quote this very code.
            "        if "
            + repr(token.encode())
            + " in open('/proc/%s/cmdline' % pid, 'rb').read().split(b'\\0'):\n"
            "            seen.append(pid)\n"
            "    except OSError:\n"
            "        pass\n"
            "report(count=len(pids), seen=seen)\n"
        )
        result, reply = await run_probe(ctx, body)
    if reply is None:
        return no_reply(result)
    evidence = escape_text(f"{reply['count']} pids visible; canary {token} seen as pid(s) {reply['seen']}")
    if reply["seen"]:
        return Finding(Verdict.BROKEN, "sees a host process's command line", evidence)
    return Finding(Verdict.HELD, f"host processes are invisible ({reply['count']} pids seen)", evidence)


async def proc_masked(ctx: AuditContext) -> Finding:
    body = (
        "import os, errno\n"
        "out = {}\n"
        "for path in ('/proc/kcore', '/proc/keys', '/proc/timer_list', '/proc/sched_debug', '/proc/kallsyms',"
        " '/sys/firmware/dmi/tables/DMI'):\n"
        "    try:\n"
        "        with open(path, 'rb') as f:\n"
        "            data = f.read(256)\n"
        "        out[path] = 'read %d bytes' % len(data) if data.strip(b'\\0 0\\n') else 'empty'\n"
        "    except OSError as exc:\n"
        "        out[path] = errno.errorcode.get(exc.errno, str(exc.errno))\n"
        "for path in ('/proc/sysrq-trigger', '/proc/sys/kernel/core_pattern'):\n"
        "    out[path + ' (write)'] = 'WRITABLE' if os.access(path, os.W_OK) else 'not writable'\n"
        "report(out=out)\n"
    )
    result, reply = await run_probe(ctx, body)
    if reply is None:
        return no_reply(result)
    out: dict[str, str] = reply["out"]
    evidence = escape_text("; ".join(f"{k}: {v}" for k, v in out.items()))
    writable = [k for k, v in out.items() if v == "WRITABLE"]
    readable = [k for k, v in out.items() if v.startswith("read ") and k != "/proc/kallsyms"]
    if writable:
        return Finding(Verdict.BROKEN, f"writable: {', '.join(writable)}", evidence)
    if readable:
        return Finding(Verdict.WEAK, f"readable: {', '.join(readable)}", evidence)
    return Finding(Verdict.HELD, "sensitive kernel files masked or empty; nothing writable", evidence)


_ENV_ALLOWED = {"PATH", "LANG", "HOME", "TMPDIR", "PWD", "SHLVL", "TERM", "LC_ALL", "HOSTNAME", "_"}


async def environment(ctx: AuditContext) -> Finding:
    name = f"PROCTOR_AUDIT_CANARY_{secrets.token_hex(4).upper()}"
    value = secrets.token_hex(16)
    # Set in the audit's own process only for this call: any backend that passes the host's
    # environment through would hand it on.
    os.environ[name] = value
    try:
        result, reply = await run_probe(ctx, "import os\nreport(env=dict(os.environ))\n")
    finally:
        os.environ.pop(name, None)
    if reply is None:
        return no_reply(result)
    env: dict[str, str] = reply["env"]
    leaked = sorted(key for key, seen in env.items() if key == name or value in seen)
    # Same name and value as the host's may be a coincidence (both set by their images).
    alike = sorted(
        key for key, seen in env.items() if key not in _ENV_ALLOWED and os.environ.get(key) == seen
    )
    evidence = escape_text(
        f"canary {name}: {'PASSED ON' if leaked else 'absent'}; variables: {sorted(env)}; "
        f"equal to the host's: {alike or 'none'}"
    )
    if leaked:
        return Finding(Verdict.BROKEN, "the host's environment reached the program", evidence)
    return Finding(Verdict.HELD, f"{len(env)} variables; the host's canary did not pass", evidence)


# Counters the kernel keeps for the whole host. A call that reads them sees what concurrent
# calls, in other samples, do: one that holds and releases memory in time slots moves every
# other call's MemAvailable (about 2 bits a minute measured). Each container gets its own meminfo,
# stat, uptime and CPU list, rendered from its limits (sandbox/docker/host_counters.py); the files below
# have no per-container view.
HOST_COUNTER_FILES = (
    "/proc/vmstat",
    "/proc/zoneinfo",
    "/proc/buddyinfo",
    "/proc/pressure/memory",
    "/proc/pressure/cpu",
    "/sys/devices/system/node/node0/meminfo",
)


async def host_counters(ctx: AuditContext) -> Finding:
    body = (
        "import os\n"
        "def kib(name):\n"
        "    for line in open('/proc/meminfo'):\n"
        "        if line.startswith(name + ':'):\n"
        "            return int(line.split()[1])\n"
        "readable = []\n"
        f"for path in {list(HOST_COUNTER_FILES)!r}:\n"
        "    try:\n"
        "        with open(path) as fh:\n"
        "            if fh.read(64):\n"
        "                readable.append(path)\n"
        "    except OSError:\n"
        "        pass\n"
        "try:\n"
        "    total = kib('MemTotal')\n"
        "except OSError as exc:\n"
        "    total = 'unreadable: ' + type(exc).__name__\n"
        "report(mem_total_kib=total, cpus=os.cpu_count(), readable=readable)\n"
    )
    result, reply = await run_probe(ctx, body)
    if reply is None and result.exit_code == 137:
        # Killed from outside while only reading files: on a sandbox without limits an earlier
        # row's bomb can leave the host's OOM killer busy. A reader proves nothing by dying; once more.
        result, reply = await run_probe(ctx, body)
    if reply is None:
        return no_reply(result)
    total, readable = reply.get("mem_total_kib"), [str(path) for path in reply.get("readable") or []]
    limit_kib = ctx.limits.memory_bytes // 1024
    own_memory = isinstance(total, int) and total == limit_kib
    evidence = escape_text(
        f"MemTotal {total} kB (limit {limit_kib} kB), cpu_count {reply.get('cpus')}; "
        f"host-wide and readable: {', '.join(readable) or 'none'}"
    )
    if not own_memory:
        return Finding(
            Verdict.WEAK,
            "/proc/meminfo is the host's: concurrent calls can signal through MemAvailable",
            evidence,
        )
    if readable:
        return Finding(
            Verdict.WEAK,
            "meminfo is the call's own; other host-wide memory counters remain readable",
            evidence,
        )
    return Finding(Verdict.HELD, "every memory counter the call reads is its own", evidence)


CHECKS = [
    Check(
        "files.host",
        FILES,
        "read a file the audit wrote on the host",
        "not visible",
        host_files,
        quick=True,
        host_side=True,
    ),
    Check(
        "files.engine_socket",
        FILES,
        "find and connect to docker/containerd/podman/cri-o sockets",
        "none visible",
        engine_socket,
        quick=True,
    ),
    Check(
        "priv.capabilities",
        PRIVILEGES,
        "read the capability sets and no_new_privs",
        "all sets empty, no_new_privs on",
        capabilities,
        quick=True,
    ),
    Check("priv.non_root", PRIVILEGES, "read the program's uid", "not uid 0", non_root, quick=True),
    Check(
        "priv.setuid",
        PRIVILEGES,
        "setuid(0)/setgid(0); look for setuid binaries",
        "refused; setuid bits inert",
        setuid,
    ),
    Check(
        "priv.mount_unshare",
        PRIVILEGES,
        "mount a tmpfs; unshare user/mount/net/pid namespaces",
        "all refused",
        mount_unshare,
    ),
    Check(
        "priv.ptrace",
        PRIVILEGES,
        "PTRACE_ATTACH to every process it did not start",
        "refused for each",
        ptrace,
        quick=True,
    ),
    Check(
        "priv.bpf_keyctl",
        PRIVILEGES,
        "bpf(BPF_MAP_CREATE) and keyctl on the session keyring",
        "refused",
        bpf_keyctl,
    ),
    Check(
        "proc.host_processes",
        PROC,
        "find a host process (the audit's canary) in /proc",
        "not visible",
        host_processes,
        quick=True,
        host_side=True,
    ),
    Check(
        "proc.masked",
        PROC,
        "read /proc/kcore, keys, timer_list, sched_debug, DMI; write sysrq-trigger",
        "masked or empty; nothing writable",
        proc_masked,
    ),
    Check(
        "proc.host_counters",
        PROC,
        "read /proc/meminfo's total against the limit; read vmstat, zoneinfo, PSI, NUMA meminfo",
        "every memory counter is the call's own (weak: a covert channel between concurrent calls)",
        host_counters,
        quick=True,
    ),
    Check(
        "proc.environment",
        PROC,
        "dump the environment; look for the host's (and a canary set for this call)",
        "none of the host's variables",
        environment,
        quick=True,
    ),
]
