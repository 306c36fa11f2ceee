"""Statelessness: nothing one call leaves behind may be seen by the next.

A first call leaves a token everywhere it can write, in /dev/shm, in System V IPC, and in a
detached process; later calls (through the same sandbox object, so through its warm pool)
look for any of it.
"""

from __future__ import annotations

import asyncio
import secrets

from proctor.agent.audit.model import (
    AuditContext,
    Check,
    CheckFunc,
    Finding,
    Verdict,
    escape_text,
    no_reply,
    run_probe,
    shared_host,
)

KLASS = "statelessness"

_PLANT = """\
import os, sys, ctypes
token = sys.stdin.read().strip()
planted = {}
candidates = ["/tmp", os.getcwd(), os.path.expanduser("~"), "/dev/shm", "/var/tmp", "/run", "/run/lock",
              "/var/lock", "/", "/etc", "/opt", "/usr/local", "/var/cache", "/var/lib"]
for d in candidates:
    path = os.path.join(d, ".proctor-audit-" + token)
    try:
        with open(path, "w") as f:
            f.write(token)
        planted[d] = "planted"
    except OSError as exc:
        planted[d] = type(exc).__name__
libc = ctypes.CDLL(None, use_errno=True)
key = int(token[:7], 16)
planted["sysv_shm"] = libc.shmget(key, 4096, 0o1000 | 0o666)
planted["sysv_msg"] = libc.msgget(key, 0o1000 | 0o666)
planted["sysv_sem"] = libc.semget(key, 1, 0o1000 | 0o666)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        null = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        try:
            sleeper = [sys.executable, "-c", "import time; time.sleep(30)", "proctor-audit-" + token]
            os.execv(sys.executable, sleeper)
        finally:
            os._exit(0)
    os._exit(0)
report(planted=planted)
"""

_LOOK = """\
import os, sys
tokens = sys.stdin.read().split()
# Built, not written out: this program's own command line holds its source.
MARK = "proctor" + "-audit-"
found = []
candidates = ["/tmp", os.getcwd(), os.path.expanduser("~"), "/dev/shm", "/var/tmp", "/run", "/run/lock",
              "/var/lock", "/", "/etc", "/opt", "/usr/local", "/var/cache", "/var/lib"]
for d in candidates:
    try:
        names = os.listdir(d)
    except OSError:
        continue
    for name in names:
        if name.startswith("." + MARK):
            found.append(os.path.join(d, name))
keys = {"%d" % int(t[:7], 16) for t in tokens}
for kind in ("shm", "msg", "sem"):
    try:
        for line in open("/proc/sysvipc/" + kind).read().splitlines()[1:]:
            if line.split() and line.split()[0] in keys:
                found.append("sysv " + kind + " key " + line.split()[0])
    except OSError:
        pass
for pid in os.listdir("/proc"):
    if pid.isdigit() and int(pid) != os.getpid():
        try:
            args = open("/proc/%s/cmdline" % pid, "rb").read().split(b"\\0")
            if any(arg.startswith(MARK.encode()) for arg in args):
                found.append("process " + pid)
        except OSError:
            pass
report(found=found)
"""


# Removes what a plant made. Where IPC or a path is not private to the sandbox (the local
# backend shares the host's SysV IPC), it would otherwise outlive the audit on the host.
_REMOVE = """\
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
removed = 0
candidates = ["/tmp", os.getcwd(), os.path.expanduser("~"), "/dev/shm", "/var/tmp", "/run", "/run/lock",
              "/var/lock", "/", "/etc", "/opt", "/usr/local", "/var/cache", "/var/lib"]
for token in sys.stdin.read().split():
    for d in candidates:
        try:
            os.unlink(os.path.join(d, ".proctor-audit-" + token))
            removed += 1
        except OSError:
            pass
    key = int(token[:7], 16)
    # IPC_RMID is 0 for all three.
    for ident, remove in ((libc.shmget(key, 0, 0), lambda i: libc.shmctl(i, 0, None)),
                          (libc.msgget(key, 0), lambda i: libc.msgctl(i, 0, None)),
                          (libc.semget(key, 0, 0), lambda i: libc.semctl(i, 0, 0))):
        if ident >= 0:
            remove(ident)
            removed += 1
report(removed=removed)
"""


# The plant, look and removal probes do little, but a loaded machine can hold a call past the
# usual 10 s, and a plant that never reported grades the row broken: their budget is generous.
STATE_PROBE_TIMEOUT_S = 30.0


async def _remove_ipc(ctx: AuditContext, tokens: list[str]) -> None:
    await run_probe(ctx, _REMOVE, stdin=" ".join(tokens), timeout=STATE_PROBE_TIMEOUT_S)


async def _plant(ctx: AuditContext) -> tuple[str, dict[str, object] | None, str]:
    token = secrets.token_hex(16)
    result, reply = await run_probe(ctx, _PLANT, stdin=token, timeout=STATE_PROBE_TIMEOUT_S)
    return token, reply, result.stderr[-200:]


async def across_calls(ctx: AuditContext) -> Finding:
    token, planted, stderr = await _plant(ctx)
    try:
        return await _look_after(ctx, token, planted, stderr)
    finally:
        await _remove_ipc(ctx, [token])


async def _look_after(
    ctx: AuditContext, token: str, planted: dict[str, object] | None, stderr: str
) -> Finding:
    if planted is None:
        return Finding(Verdict.BROKEN, "the planting call did not report", escape_text(stderr))
    result, reply = await run_probe(ctx, _LOOK, stdin=token, timeout=STATE_PROBE_TIMEOUT_S)
    if reply is None:
        return no_reply(result)
    found: list[str] = reply["found"]
    where = planted["planted"]
    assert isinstance(where, dict)
    evidence = escape_text(
        f"planted: {[k for k, v in where.items() if v == 'planted']} + IPC + a setsid process; "
        f"next call found: {found or 'nothing'}"
    )
    if found:
        return Finding(
            Verdict.BROKEN, f"the next call saw {len(found)} trace(s) of the previous one", evidence
        )
    return Finding(Verdict.HELD, "the next call saw nothing of the previous one", evidence)


async def pool_reuse(ctx: AuditContext) -> Finding:
    """Several plants at once and several looks at once, so every pooled slot serves both."""
    rounds = 2 if ctx.quick else 3
    plants = await asyncio.gather(*(_plant(ctx) for _ in range(rounds)))
    tokens = " ".join(token for token, _, _ in plants)
    try:
        looks = await asyncio.gather(
            *(run_probe(ctx, _LOOK, stdin=tokens, timeout=STATE_PROBE_TIMEOUT_S) for _ in range(rounds))
        )
    finally:
        await _remove_ipc(ctx, tokens.split())
    found: list[str] = []
    for result, reply in looks:
        if reply is None:
            return no_reply(result)
        found.extend(reply["found"])
    evidence = escape_text(
        f"{rounds} concurrent planting calls, then {rounds} concurrent looks; found: {found or 'nothing'}"
    )
    if found:
        return Finding(Verdict.BROKEN, f"{len(found)} trace(s) crossed between calls", evidence)
    return Finding(Verdict.HELD, f"no trace crossed between {2 * rounds} calls", evidence)


_QUOTA_HOG = """\
import ctypes, time
libc = ctypes.CDLL(None, use_errno=True)
held = []
while len(held) < 100000:
    fd = libc.inotify_init()
    if fd < 0:
        break
    held.append(fd)
began = time.monotonic()
time.sleep(6)
report(held=len(held), began=began, ended=time.monotonic())
"""
_QUOTA_VICTIM = """\
import ctypes, errno, os, time
libc = ctypes.CDLL(None, use_errno=True)
tries, refused, began = 0, [], time.monotonic()
while time.monotonic() - began < 6:
    fd = libc.inotify_init()
    tries += 1
    if fd < 0:
        refused.append(errno.errorcode.get(ctypes.get_errno(), "?"))
    else:
        os.close(fd)
    time.sleep(0.05)
report(tries=tries, refused=sorted(set(refused)), began=began, ended=time.monotonic())
"""


async def per_uid_quota(ctx: AuditContext) -> Finding:
    # Kernel quotas counted per host uid (inotify instances, message-queue bytes, queued signals)
    # couple every call that runs as the same uid: one call may exhaust them for the others.
    if (host := shared_host(ctx)) is not None:
        # Run as this audit's own uid, the hog would starve every process of that uid here.
        evidence = escape_text(f"program uid {host.get('uid')}, user namespace {host.get('user_ns')}")
        if host.get("same_uid"):
            return Finding(
                Verdict.BROKEN,
                "the calls run as this audit's own uid in its user namespace: the kernel counts "
                "their inotify instances together (not attempted: it would starve this machine)",
                evidence,
            )
        return Finding(Verdict.SKIPPED, "not run: the calls share this machine's processes", evidence)
    (hog, held), (victim, tried) = await asyncio.gather(
        run_probe(ctx, _QUOTA_HOG, timeout=30), run_probe(ctx, _QUOTA_VICTIM, timeout=30)
    )
    if held is None:
        return no_reply(hog)
    if tried is None:
        return no_reply(victim)
    evidence = escape_text(
        f"first call held {held['held']} inotify instances; the second tried {tried['tries']} times, "
        f"refused: {tried['refused'] or 'never'}"
    )
    if tried["refused"]:
        return Finding(Verdict.BROKEN, "one call's use refused the other call's inotify_init()", evidence)
    # CLOCK_MONOTONIC is not namespaced: when the two windows do not overlap the calls ran one
    # after the other (a single execution slot), and nothing was shown either way.
    if max(held["began"], tried["began"]) >= min(held["ended"], tried["ended"]):
        return Finding(Verdict.WEAK, "the two calls did not run at the same time; not shown", evidence)
    return Finding(Verdict.HELD, "the calls beside it kept their own quota", evidence)


# What a reset container cannot undo (sandbox.isolation per-sample, docs/sandbox.md): counters
# the kernel keeps per namespace or per mount. A call reads where each stands, then moves each
# on by ADVANCE (the most a signalling call would do); the next call reads them again. Carried
# over, the second reading is at least ADVANCE past the first: the channel is open.
ADVANCE = 64
_COUNTERS = """\
import ctypes, os, sys, tempfile
libc = ctypes.CDLL(None, use_errno=True)
def counters():
    child = os.fork()
    if child == 0:
        os._exit(0)
    os.waitpid(child, 0)
    fd, path = tempfile.mkstemp(dir="/tmp")
    inode = os.fstat(fd).st_ino
    os.close(fd)
    os.unlink(path)
    # IPC_PRIVATE, then IPC_RMID: where this IPC namespace's next identifier stands.
    ident = libc.shmget(0, 4096, 0o600)
    if ident >= 0:
        libc.shmctl(ident, 0, None)
    return {"next_pid": child, "inode": inode, "ipc_id": ident}
first = counters()
for _ in range(int(sys.stdin.read() or 0)):
    counters()
report(**first)
"""
_CHANNELS = {"next_pid": "next PID", "inode": "inode numbers", "ipc_id": "System V IPC ids"}


def _call_isolation(ctx: AuditContext) -> str:
    return str(ctx.sandbox.describe().get("call_isolation") or "fresh")


def _counter_check(name: str) -> CheckFunc:
    async def check(ctx: AuditContext) -> Finding:
        isolation = _call_isolation(ctx)
        seen: list[int] = []
        # One after the other, as one sample's calls are: the second is the first's "next call".
        for advance in (ADVANCE, 0):
            result, reply = await run_probe(ctx, _COUNTERS, stdin=str(advance), timeout=20)
            if reply is None:
                return no_reply(result)
            seen.append(int(reply[name]))
        carried = seen[0] >= 0 and seen[1] >= seen[0] + ADVANCE
        label = _CHANNELS[name]
        evidence = escape_text(
            f"isolation {isolation}; {label}: the first call read {seen[0]} and moved it on "
            f"{ADVANCE} times, the next call read {seen[1]}"
        )
        if isolation != "fresh":
            # Weak by design: whether or not this pair met in one container, a sample's calls may.
            said = "it did here" if carried else "not shown in this pair"
            return Finding(
                Verdict.WEAK,
                f"isolation {isolation}: a sample's next call can read where its previous call "
                f"left the {label} ({said})",
                evidence,
            )
        if carried:
            return Finding(
                Verdict.BROKEN, f"the next call read the {label} the previous call moved", evidence
            )
        return Finding(
            Verdict.HELD,
            f"the next call's reading of the {label} owes nothing to the previous call",
            evidence,
        )

    return check


CHECKS = [
    Check(
        "state.across_calls",
        KLASS,
        "leave files in every writable path and /dev/shm, SysV IPC objects and a setsid process; "
        "look in the next call",
        "the next call sees none of it",
        across_calls,
        quick=True,
    ),
    Check(
        "state.pool_reuse",
        KLASS,
        "the same, several calls at once, so each warm container is tried",
        "no trace crosses between calls",
        pool_reuse,
    ),
    Check(
        "state.per_uid_quota",
        KLASS,
        "hold every inotify instance the kernel allows one uid while a second call, at the same "
        "time, keeps creating them",
        "the second call is never refused",
        per_uid_quota,
        timeout_s=45,
    ),
    *(
        Check(
            f"state.{name}",
            KLASS,
            f"read where the {label} stand, move them on {ADVANCE} times, read them in the next call",
            "the next call's reading owes nothing to the first's (a fresh container); under "
            "isolation per-sample a weak row by design",
            _counter_check(name),
        )
        for name, label in _CHANNELS.items()
    ),
]
