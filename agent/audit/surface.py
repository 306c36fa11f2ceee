"""What a program alone can learn or do: the host's file systems bound into the sandbox, and a
program larger than the kernel's argument limit.

Both run through any sandbox, Proctor's or not (``--command``): they read only what the
program itself sees (``/proc/self/mountinfo``) or what the call returns.
"""

from __future__ import annotations

from proctor.agent.audit.model import (
    AuditContext,
    Check,
    Finding,
    Verdict,
    describe_exec,
    escape_text,
    no_reply,
    run_probe,
)
from proctor.sandbox import SandboxError

FILES = "isolation: host files"
LIMITS = "limits"

# File systems that are the kernel's or the engine's own, never a directory of the host's disk.
PSEUDO = frozenset(
    {
        *("proc", "sysfs", "tmpfs", "devtmpfs", "devpts", "mqueue", "cgroup", "cgroup2", "overlay", "shm"),
        *("securityfs", "debugfs", "tracefs", "bpf", "pstore", "hugetlbfs", "configfs", "fusectl"),
        *("binfmt_misc", "nsfs", "autofs", "none"),
    }
)
# Per-container files the engine itself bind-mounts (its own copy, not a shared host path).
ENGINE_FILES = frozenset(
    {"/etc/hostname", "/etc/hosts", "/etc/resolv.conf", "/usr/sbin/docker-init", "/sbin/docker-init"}
)

_MOUNTS = f"""\
found = []
for line in open("/proc/self/mountinfo"):
    fields = line.split()
    dash = fields.index("-")
    root, point, options, fstype, source = fields[3], fields[4], fields[5], fields[dash + 1], fields[dash + 2]
    if fstype in {sorted(PSEUDO)!r} or point == "/" or point in {sorted(ENGINE_FILES)!r}:
        continue
    found.append({{"root": root, "at": point, "fs": fstype, "source": source,
                   "writable": "rw" in options.split(",")}})
report(mounts=found)
"""


async def host_mounts(ctx: AuditContext) -> Finding:
    result, reply = await run_probe(ctx, _MOUNTS)
    if reply is None:
        return no_reply(result)
    mounts = reply.get("mounts")
    if not isinstance(mounts, list):
        return Finding(Verdict.BROKEN, "the probe's reply is malformed", escape_text(repr(reply)))
    shown = "; ".join(
        f"{m.get('root')} at {m.get('at')} ({m.get('fs')} {m.get('source')}, "
        f"{'rw' if m.get('writable') else 'ro'})"
        for m in mounts
    )
    evidence = escape_text(f"host file-system mounts: {shown or 'none'}")
    writable = [m for m in mounts if m.get("writable")]
    if writable:
        where = ", ".join(str(m.get("at")) for m in writable)
        return Finding(Verdict.BROKEN, f"a host directory is mounted writable at {where}", evidence)
    if mounts:
        where = ", ".join(str(m.get("at")) for m in mounts)
        return Finding(Verdict.WEAK, f"host directories visible read-only at {where}", evidence)
    return Finding(Verdict.HELD, "no host directory is mounted", evidence)


# Over the whole argument limit (ARG_MAX: a quarter of the 8 MiB stack) as well as one
# argument's (MAX_ARG_STRLEN, 128 KiB): a sandbox that passes code on a command line cannot.
LARGE_PROGRAM_BYTES = 3 * 1024 * 1024


async def large_program(ctx: AuditContext) -> Finding:
    size = LARGE_PROGRAM_BYTES
    body = f"blob = {'x' * size!r}\nreport(size=len(blob))\n"
    try:
        result, reply = await run_probe(ctx, body, timeout=30)
    except SandboxError as exc:
        return Finding(
            Verdict.BROKEN,
            "the sandbox itself failed: a program can make a call error out at will",
            escape_text(f"{type(exc).__name__}: {exc}"),
        )
    evidence = escape_text(f"a {size >> 20} MiB program; {describe_exec(result)}")
    if reply is None:
        return Finding(Verdict.WEAK, "refused: the program did not run (a clean failure)", evidence)
    if reply.get("size") != size:
        return Finding(Verdict.BROKEN, f"ran a different program (saw {reply.get('size')} bytes)", evidence)
    return Finding(Verdict.HELD, f"ran intact ({size >> 20} MiB)", evidence)


CHECKS = [
    Check(
        "files.bind_mounts",
        FILES,
        "list the host file systems bound into the sandbox (/proc/self/mountinfo)",
        "none, or only the engine's own per-container files",
        host_mounts,
    ),
    Check(
        "limits.large_program",
        LIMITS,
        "run a 3 MiB program, past the kernel's argument limit",
        "runs intact",
        large_program,
        timeout_s=45,
    ),
]
