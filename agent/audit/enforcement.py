"""Enforcement: programs that fight the limits and whatever enforces them.

Escaped processes are looked for from the host's own /proc (containers and the local
backend share its kernel): a marker in their command line, unique to this audit.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
from pathlib import Path

from proctor.agent.audit.model import (
    COMMAND_OWN_TIMEOUT,
    COMMAND_TRACEME,
    INSPECT,
    INSPECT_TRACEME,
    PROCTOR_BACKENDS,
    AuditContext,
    Check,
    Finding,
    NotRun,
    Verdict,
    describe_exec,
    escape_text,
    no_reply,
    run_probe,
    shared_host,
)

KLASS = "enforcement"


def host_processes_with(marker: str) -> list[int]:
    """PIDs on this host whose command line holds ``marker``."""
    found = []
    needle = marker.encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


async def _survivors(marker: str, grace_s: float) -> list[int]:
    """Processes with ``marker`` still alive after ``grace_s``; each is killed by its PID."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace_s
    while True:
        alive = await asyncio.to_thread(host_processes_with, marker)
        if not alive or loop.time() >= deadline:
            break
        await asyncio.sleep(0.2)
    for pid in alive:
        # Only processes carrying this audit's own random marker: ours, escaped.
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return alive


async def sigterm_ignored(ctx: AuditContext) -> Finding:
    timeout = 1.5
    body = (
        "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "while True:\n    time.sleep(0.01)\n"
    )
    result, _ = await run_probe(ctx, body, timeout=timeout)
    evidence = escape_text(f"timeout {timeout} s; {describe_exec(result)}")
    if not result.timed_out:
        return Finding(Verdict.BROKEN, "not reported as a timeout", evidence)
    if result.duration_s > timeout + 5:
        return Finding(Verdict.WEAK, f"ended only after {result.duration_s:.2f} s", evidence)
    return Finding(Verdict.HELD, f"killed after {result.duration_s:.2f} s", evidence)


_ESCAPE = """\
import os, sys
marker = sys.stdin.read().strip()
def spawn(detach):
    if os.fork() == 0:
        if detach:
            os.setsid()
            if os.fork() != 0:
                os._exit(0)
        deaf = ("import time, signal; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                "signal.signal(signal.SIGHUP, signal.SIG_IGN); time.sleep(60)")
        os.execv(sys.executable, [sys.executable, "-c", deaf, marker])
spawn(True)
spawn(False)
report(spawned=2)
"""


async def escaped_children(ctx: AuditContext) -> Finding:
    marker = f"proctor-audit-escape-{secrets.token_hex(8)}"
    try:
        result, reply = await run_probe(ctx, _ESCAPE, stdin=marker, timeout=10)
    except NotRun:
        raise
    except Exception as exc:  # a call that never came back while its children held its pipes
        survivors = await _survivors(marker, grace_s=0.0)
        return Finding(
            Verdict.BROKEN,
            "the call did not come back while the children it left ran",
            escape_text(f"{type(exc).__name__}: {exc}; alive on the host then: {survivors or 'none'}"),
        )
    if reply is None:
        return no_reply(result)
    survivors = await _survivors(marker, grace_s=3.0)
    hosts = await _container_hosts_left(ctx, result.extra.get("container_id"))
    evidence = escape_text(
        "a double-forked setsid child and a plain child, both ignoring SIGTERM/SIGHUP; "
        f"{describe_exec(result)}; "
        f"alive on the host 3 s after the call: {survivors or 'none'}"
        + (
            f"; gVisor processes of the call's container {CONTAINER_GRACE_S:g} s later: {hosts or 'none'}"
            if hosts is not None
            else ""
        )
    )
    if survivors:
        return Finding(
            Verdict.BROKEN, f"{len(survivors)} process(es) outlived the call (killed by the audit)", evidence
        )
    if hosts:
        return Finding(Verdict.BROKEN, "the gVisor sandbox hosting the call outlived it", evidence)
    return Finding(Verdict.HELD, "nothing outlived the call", evidence)


# Removing a runsc container after the call runs in the background and takes longer than runc's.
CONTAINER_GRACE_S = 10.0


async def _container_hosts_left(ctx: AuditContext, container_id: object) -> list[int] | None:
    """Under runsc, the host processes (sentry, gofer, shim) still serving the call's container.

    gVisor's sandboxed processes never appear in the host's /proc, so the marker search above
    cannot see them; every one of them lives inside the sentry, so the sentry's end is theirs.
    None when not applicable (runc shares the host's /proc; the local backend has no container).
    """
    if ctx.runtime != "runsc" or not isinstance(container_id, str) or not container_id:
        return None
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CONTAINER_GRACE_S
    while True:
        alive = await asyncio.to_thread(host_processes_with, container_id)
        if not alive or loop.time() >= deadline:
            return alive
        await asyncio.sleep(0.2)


async def fork_bomb(ctx: AuditContext) -> Finding:
    return await _process_bomb(ctx, "time.sleep(30)", "processes", "stopped at {made} processes")


async def zombie_bomb(ctx: AuditContext) -> Finding:
    # Children that exit at once and are never reaped: zombies still hold their pids.
    return await _process_bomb(ctx, "pass", "zombies", "zombies bounded at {made}")


async def _process_bomb(ctx: AuditContext, child_body: str, noun: str, held: str) -> Finding:
    """Fork past twice the pids limit; the limit must stop it and leave the next call working."""
    ceiling = ctx.limits.pids * 2 + 16
    body = f"""\
import os, time
made = 0
error = None
while made < {ceiling}:
    try:
        pid = os.fork()
    except OSError as exc:
        error = str(exc)
        break
    if pid == 0:
        {child_body}
        os._exit(0)
    made += 1
report(made=made, error=error)
"""
    result, reply = await run_probe(ctx, body, timeout=20)
    if reply is None:
        return no_reply(result)
    follow_up, _ = await run_probe(ctx, "report(ok=True)\n", timeout=20)
    evidence = escape_text(
        f"{reply['made']} {noun}, then: {reply['error']}; pids limit {ctx.limits.pids}; "
        f"the next call: {describe_exec(follow_up)}"
    )
    if int(reply["made"]) >= ceiling:
        return Finding(Verdict.BROKEN, f"{reply['made']} {noun} and no limit met", evidence)
    if follow_up.exit_code != 0:
        return Finding(Verdict.BROKEN, f"the next call failed after the {noun}", evidence)
    return Finding(Verdict.HELD, f"{held.format(made=reply['made'])}; the next call ran", evidence)


_FIGHT = """\
import os, signal, errno, time
def stopped(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rpartition(")")[2].split()[0] in ("T", "t")
    except (OSError, IndexError):
        return False
mine = {os.getpid()}
own_environ = set(open("/proc/self/environ", "rb").read().split(b"\\0"))
out = {}
for entry in os.listdir("/proc"):
    if not entry.isdigit() or int(entry) in mine:
        continue
    pid = int(entry)
    try:
        comm = open("/proc/%d/comm" % pid).read().strip()
    except OSError:
        comm = "?"
    row = {"comm": comm}
    try:
        os.kill(pid, signal.SIGSTOP)
        # kill() succeeding is not a stop: a namespace's init drops signals it has no handler
        # for. Only the process's own state says it stopped.
        row["stop"] = "IGNORED"
        for _ in range(50):
            if stopped(pid):
                row["stop"] = "STOPPED"
                break
            time.sleep(0.01)
        os.kill(pid, signal.SIGCONT)
    except OSError as exc:
        row["stop"] = errno.errorcode.get(exc.errno, str(exc.errno))
    for name in ("mem", "environ", "fd/0"):
        try:
            with open("/proc/%d/%s" % (pid, name), "rb") as f:
                if name == "mem":
                    f.seek(0x400000)
                data = f.read(16 if name != "environ" else 1 << 20)
            row[name] = "READ"
            # An environment that holds nothing but the program's own variables tells it nothing.
            if name == "environ" and set(data.split(b"\\0")) <= own_environ:
                row[name] = "READ-OWN"
        except OSError as exc:
            row[name] = errno.errorcode.get(exc.errno, str(exc.errno))
    try:
        row["fds"] = len(os.listdir("/proc/%d/fd" % pid))
    except OSError as exc:
        row["fds"] = errno.errorcode.get(exc.errno, str(exc.errno))
    out[pid] = row
report(processes=out)
"""


async def _fight(ctx: AuditContext) -> tuple[Finding | None, dict[str, dict[str, object]]]:
    from proctor.agent.audit.shared import shared_probe

    result, reply = await shared_probe(ctx, "fight", _FIGHT, timeout=15)
    if reply is None:
        return no_reply(result), {}
    return None, reply["processes"]


def _shared_host_evidence(host: dict[str, object]) -> str:
    return escape_text(
        f"program uid {host.get('uid')} in {host.get('pid_ns')} (this audit's own PID namespace); "
        f"signal 0 to this audit's pid {host.get('audit_pid')}: {host.get('signal')}; "
        f"its /proc/PID/environ: {host.get('environ')}"
    )


async def stop_enforcer(ctx: AuditContext) -> Finding:
    if (host := shared_host(ctx)) is not None:
        # Proven without the attack: SIGSTOP of every process would stop this machine's own.
        return Finding(
            Verdict.BROKEN,
            "signalled this audit's own process from the sandbox; SIGSTOP of the others not attempted "
            "(they are this machine's processes)",
            _shared_host_evidence(host),
        )
    failed, processes = await _fight(ctx)
    if failed is not None:
        return failed
    stopped = {pid: row["comm"] for pid, row in processes.items() if row["stop"] == "STOPPED"}
    evidence = escape_text(
        "; ".join(f"pid {pid} ({row['comm']}): {row['stop']}" for pid, row in processes.items())
    )
    if stopped:
        return Finding(Verdict.BROKEN, f"stopped process(es) it did not start: {stopped}", evidence)
    ignored = sorted(pid for pid, row in processes.items() if row["stop"] == "IGNORED")
    if ignored:
        return Finding(
            Verdict.HELD,
            f"SIGSTOP refused or dropped for all {len(processes)} other process(es) (dropped by the "
            f"namespace's init: {', '.join(ignored)})",
            evidence,
        )
    return Finding(Verdict.HELD, f"SIGSTOP refused for all {len(processes)} other process(es)", evidence)


async def read_enforcer(ctx: AuditContext) -> Finding:
    if (host := shared_host(ctx)) is not None:
        if host.get("environ") == "READ":
            return Finding(
                Verdict.BROKEN,
                "read this audit's own /proc/PID/environ from the sandbox; the others not attempted",
                _shared_host_evidence(host),
            )
        return Finding(
            Verdict.SKIPPED,
            "not run: the program shares this machine's processes (the probe would stop them), and "
            "this audit's own environment was not readable",
            _shared_host_evidence(host),
        )
    failed, processes = await _fight(ctx)
    if failed is not None:
        return failed
    leaks = {
        pid: [name for name in ("mem", "environ", "fd/0") if row.get(name) == "READ"]
        for pid, row in processes.items()
    }
    leaks = {pid: names for pid, names in leaks.items() if names}
    # gVisor (runsc) lets any uid read /proc/PID/environ; there it holds only the container's
    # environment, which is the program's own: readable, but nothing is learnt.
    own_environment = {pid: ["environ"] for pid, row in processes.items() if row.get("environ") == "READ-OWN"}
    evidence = escape_text(
        "; ".join(
            f"pid {pid} ({row['comm']}): mem {row['mem']}, environ {row['environ']}, stdin {row['fd/0']}, "
            f"fds {row['fds']}"
            for pid, row in processes.items()
        )
    )
    if leaks:
        return Finding(Verdict.BROKEN, f"read the memory, environment or stdin of {leaks}", evidence)
    if own_environment:
        return Finding(
            Verdict.WEAK,
            f"memory and stdin refused; the environment of {sorted(own_environment)} is readable but "
            "holds only the program's own variables",
            evidence,
        )
    return Finding(Verdict.HELD, f"nothing readable in {len(processes)} other process(es)", evidence)


# ptrace(PTRACE_TRACEME) makes the supervisor (the docker launcher, the local backend's init)
# the program's tracer; its stops then reach the supervisor's waitpid. Attack tests:
# tests/sandbox/test_launcher_attacks.py (every backend).
_TRACED_SUPERVISOR = """\
import ctypes, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
signal.signal(signal.SIGUSR1, lambda *_: print('handled', flush=True))
rc = libc.ptrace(0, 0, None, None)
print('traceme', 'ok' if rc == 0 else os.strerror(ctypes.get_errno()), flush=True)
os.kill(os.getpid(), signal.SIGUSR1)
signal.raise_signal(signal.SIGUSR1)
sys.exit(7)
"""


async def traced_supervisor(ctx: AuditContext) -> Finding:
    result = await ctx.sandbox.exec(_TRACED_SUPERVISOR, timeout=10)
    evidence = escape_text(f"{describe_exec(result)}; stdout {result.stdout[-200:]!r}")
    if result.exit_code != 7 or not result.stdout.endswith("handled\nhandled\n"):
        return Finding(Verdict.BROKEN, "the call did not end as the program ended itself (exit 7)", evidence)
    how = "detached by the supervisor" if result.stdout.startswith("traceme ok") else "PTRACE_TRACEME refused"
    return Finding(
        Verdict.HELD, f"the program's own exit code (7) came back; its handler ran twice ({how})", evidence
    )


# After a call whose container is gone, no host process may remain in the container's cgroups:
# on this engine a traced process whose tracer died was seen to sit in tracing stop after
# `docker rm -f`. Tests: tests/sandbox/test_launcher_attacks.py (after every call, every
# container) and tests/audit/test_audit.py::test_leftover_row_sees_a_process_in_a_gone_containers_cgroup.
_LEFTOVER = """\
import ctypes, os, signal, time
libc = ctypes.CDLL(None, use_errno=True)
child = os.fork()
if child == 0:
    libc.ptrace(0, 0, None, None)
    os.kill(os.getpid(), signal.SIGSTOP)
    os._exit(0)
if os.fork() == 0:
    os.setsid()
    time.sleep(3600)
print('planted', flush=True)
time.sleep(3600)
"""
CGROUP_ROOT = Path("/sys/fs/cgroup")


def container_cgroup_processes(container_id: str) -> list[int]:
    """Host PIDs in a container's cgroups: the engine's (cgroup v1 ``*/docker/<id>``, or v2 under
    systemd) or runc-direct's (``proctor-oci/<name>`` in every hierarchy, sandbox/docker/oci_direct.py)."""
    from proctor.sandbox.docker import oci_direct

    root = CGROUP_ROOT
    found: set[int] = set()
    patterns = (
        f"*/docker/{container_id}/cgroup.procs",
        f"system.slice/docker-{container_id}.scope/cgroup.procs",
        f"*/{oci_direct.CGROUP_PARENT}/{container_id}/cgroup.procs",
        f"{oci_direct.CGROUP_PARENT}/{container_id}/cgroup.procs",
    )
    for pattern in patterns:
        for procs in root.glob(pattern):
            with contextlib.suppress(OSError, ValueError):
                found.update(int(pid) for pid in procs.read_text().split())
    return sorted(found)


async def leftover_processes(ctx: AuditContext) -> Finding:
    result = await ctx.sandbox.exec(_LEFTOVER, timeout=1.5)
    container_id = result.extra.get("container_id")
    if not isinstance(container_id, str) or not container_id:
        return Finding(
            Verdict.BROKEN, "the call named no container to look for", escape_text(describe_exec(result))
        )
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CONTAINER_GRACE_S
    while True:
        left = await asyncio.to_thread(container_cgroup_processes, container_id)
        if not left or loop.time() >= deadline:
            break
        await asyncio.sleep(0.2)
    evidence = escape_text(
        f"a traced, stopped child and a setsid sleeper, then the 1.5 s timeout; {describe_exec(result)}; "
        f"host pids in container {container_id[:12]}'s cgroups (waited up to {CONTAINER_GRACE_S:g} s): "
        f"{left or 'none'}"
    )
    if not result.timed_out:
        return Finding(Verdict.BROKEN, "the call was not ended by its deadline", evidence)
    if left:
        return Finding(Verdict.BROKEN, f"{len(left)} process(es) outlived the container", evidence)
    return Finding(Verdict.HELD, "the container's cgroups hold no process after the call", evidence)


CHECKS = [
    Check(
        "enforce.sigterm",
        KLASS,
        "ignore SIGTERM and sleep forever under a 1.5 s timeout",
        "killed anyway",
        sigterm_ignored,
        quick=True,
        backends=(*PROCTOR_BACKENDS, INSPECT),
        not_applicable={"command": COMMAND_OWN_TIMEOUT},
    ),
    Check(
        "enforce.escaped_children",
        KLASS,
        "a double-forked setsid child and a plain child, both deaf to SIGTERM",
        "none alive on the host after the call",
        escaped_children,
        quick=True,
        host_side=True,
    ),
    Check(
        "enforce.fork_bomb",
        KLASS,
        "fork sleeping children until refused",
        "bounded by the pids limit; next call runs",
        fork_bomb,
    ),
    Check(
        "enforce.zombie_bomb",
        KLASS,
        "fork children that exit and are never reaped",
        "bounded; next call runs",
        zombie_bomb,
    ),
    Check(
        "enforce.stop",
        KLASS,
        "SIGSTOP every process it did not start (the launcher, init)",
        "refused",
        stop_enforcer,
        quick=True,
    ),
    Check(
        "enforce.read",
        KLASS,
        "read /proc/PID/mem, environ and stdin of every process it did not start",
        "refused",
        read_enforcer,
        quick=True,
    ),
    Check(
        "enforce.traced_supervisor",
        KLASS,
        "PTRACE_TRACEME, then a handled signal twice, then exit 7",
        "exit 7, the handler ran twice",
        traced_supervisor,
        quick=True,
        backends=PROCTOR_BACKENDS,
        not_applicable={"command": COMMAND_TRACEME, INSPECT: INSPECT_TRACEME},
    ),
    Check(
        "enforce.leftover_processes",
        KLASS,
        "a child traced by the program and stopped, a setsid sleeper; the call times out",
        "no process left in the gone container's cgroups",
        leftover_processes,
        quick=True,
        backends=("docker",),
        not_applicable={
            "local": "no container: the call's own cgroups are emptied and removed with it "
            "(enforce.escaped_children)",
            "ray": "the call's container lives on a worker's host: audit that host with --backend docker",
            INSPECT: "reads Proctor's own container IDs from a call; an Inspect provider names none "
            "(enforce.escaped_children looks for survivors on this host instead)",
        },
        host_side=True,
    ),
]
